"""Leases and fencing: claims, heartbeats, reclaim of expired work, stale results."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from tests.support.runs import run_inline
from workflows import LeaseLost, Retry, StaleState, Task, Workflow
from workflows.engine import STEP, claim_step, complete_work, fail_attempt, heartbeat, reclaim
from workflows.models import Step
from workflows.workers.scanners import reclaim_expired_leases

pytestmark = pytest.mark.django_db

HERE = "tests.engine.leases.test_leases"


def beats(ctx):
    ctx.heartbeat()
    return {"beat": True}


class Leased(Workflow):
    name = "lease_leased"
    work = Task(NOOP, timeout=timedelta(seconds=30), retry=Retry(max_attempts=2))
    then = Task(NOOP)


class Beating(Workflow):
    name = "lease_beating"
    work = Task(f"{HERE}.beats")


def ready_step(run, name="work") -> Step:
    step = run.steps.get(name=name)
    assert step.status == "ready"
    return step


def test_claim_moves_ready_to_running_with_a_lease_on_the_database_clock():
    run = workflows.start_run(Leased)
    step = ready_step(run)
    before = timezone.now()
    lease = claim_step(step.pk, "worker-a")
    step.refresh_from_db()
    assert (lease.attempt, lease.owner) == (1, "worker-a")
    assert step.status == "running"
    assert step.attempt == 1
    assert step.lease_owner == "worker-a"
    expected = before + timedelta(seconds=30)
    assert abs((step.lease_expires_at - expected).total_seconds()) < 2
    assert lease.version == step.version


def test_second_claim_of_the_same_step_is_stale():
    run = workflows.start_run(Leased)
    step = ready_step(run)
    claim_step(step.pk, "worker-a")
    with pytest.raises(StaleState, match="is running, not ready"):
        claim_step(step.pk, "worker-b")
    step.refresh_from_db()
    assert (step.attempt, step.lease_owner) == (1, "worker-a")


def test_heartbeat_extends_the_lease():
    run = workflows.start_run(Leased)
    lease = claim_step(ready_step(run).pk, "worker-a")
    Step.objects.filter(pk=lease.step_id).update(
        lease_expires_at=timezone.now() + timedelta(seconds=1)
    )
    heartbeat(lease)
    step = Step.objects.get(pk=lease.step_id)
    assert step.lease_expires_at > timezone.now() + timedelta(seconds=25)
    assert lease.version == step.version
    complete_work(lease, {"done": 1})  # the bumped version is still ours


def test_handler_heartbeat_inside_run_pending():
    run = run_inline(Beating)
    assert run.output == {"work": {"beat": True}}


def test_unexpired_lease_is_not_reclaimed():
    run = workflows.start_run(Leased)
    lease = claim_step(ready_step(run).pk, "worker-a")
    assert reclaim(STEP, lease.step_id) is None
    assert reclaim_expired_leases().found == 0


def test_stale_completion_after_reclaim_is_rejected_and_keeps_the_newer_attempt():
    run = workflows.start_run(Leased)
    old = claim_step(ready_step(run).pk, "worker-a")
    later = timezone.now() + timedelta(minutes=5)
    scan = reclaim_expired_leases(now=later)
    assert (scan.found, scan.done) == (1, 1)
    new = claim_step(old.step_id, "worker-b")
    assert new.attempt == 2

    with pytest.raises(LeaseLost) as lost:
        complete_work(old, {"from": "stale"})
    assert lost.value.code == "lease_lost"
    with pytest.raises(LeaseLost):
        heartbeat(old)
    with pytest.raises(LeaseLost):
        fail_attempt(old, RuntimeError("late failure"))

    step = Step.objects.get(pk=old.step_id)
    assert (step.status, step.attempt, step.lease_owner) == ("running", 2, "worker-b")
    assert step.output is None
    lost_events = run.events.filter(type="lease.lost")
    assert [e.payload["action"] for e in lost_events] == ["completion", "heartbeat", "failure"]
    assert lost_events[0].payload["attempt"] == 1
    assert lost_events[0].payload["current"]["attempt"] == 2
    assert run.events.filter(type="lease.expired").count() == 1

    complete_work(new, {"from": "fresh"})
    step.refresh_from_db()
    assert step.status == "completed"
    assert step.output == {"from": "fresh"}
    assert run.steps.get(name="then").status == "ready"


def test_expired_lease_on_the_last_attempt_fails_the_step_and_run():
    run = workflows.start_run(Leased)
    step_id = ready_step(run).pk
    later = timezone.now() + timedelta(minutes=5)
    for owner in ("worker-a", "worker-b"):
        claim_step(step_id, owner)
        reclaim_expired_leases(now=later)
    step = Step.objects.get(pk=step_id)
    run.refresh_from_db()
    assert step.status == "failed"
    assert step.attempt == 2
    assert step.error["code"] == "lease_expired"
    assert run.status == "failed"
    assert run.error["cause"] == "lease_expired"
    assert run.steps.get(name="then").status == "cancelled"


def test_complete_with_claim_next_hands_the_next_step_to_the_same_worker():
    run = workflows.start_run(Leased)
    lease = claim_step(ready_step(run).pk, "worker-a")
    following = complete_work(lease, None, claim_next=True)
    assert following is not None
    assert following.step_name == "then"
    step = Step.objects.get(pk=following.step_id)
    assert (step.status, step.lease_owner, step.attempt) == ("running", "worker-a", 1)
    assert complete_work(following, None, claim_next=True) is None
    run.refresh_from_db()
    assert run.status == "completed"


def test_a_chained_completion_records_its_history_in_order():
    """One transition completes a step and starts the next: its history says so in
    that order, the completion first."""
    run = workflows.start_run(Leased)
    lease = claim_step(ready_step(run).pk, "worker-a")
    first = run.events.latest("id").pk
    following = complete_work(lease, None, claim_next=True)
    assert following is not None
    written = list(run.events.filter(pk__gt=first).values_list("type", "step__name", "payload"))
    assert written == [
        ("step.completed", "work", {"attempt": 1}),
        ("step.started", "then", {"attempt": 1, "owner": "worker-a"}),
    ]


def test_a_rejected_chained_completion_writes_only_lease_lost():
    run = workflows.start_run(Leased)
    lease = claim_step(ready_step(run).pk, "worker-a")
    Step.objects.filter(pk=lease.step_id).update(version=lease.version + 5)
    first = run.events.latest("id").pk
    with pytest.raises(LeaseLost):
        complete_work(lease, None, claim_next=True)
    assert list(run.events.filter(pk__gt=first).values_list("type", flat=True)) == ["lease.lost"]
    assert Step.objects.get(run=run, name="then").status == "pending"


def test_ready_work_nobody_claimed_is_sent_again_and_recorded():
    from workflows.workers.scanners import redispatch_unclaimed

    run = workflows.start_run(Leased)
    step = ready_step(run)
    assert redispatch_unclaimed().found == 0  # just made ready: not stale yet
    later = timezone.now() + timedelta(minutes=5)
    assert redispatch_unclaimed(now=later).done == 1
    assert run.events.filter(type="step.redispatched", step=step).count() == 1
    assert redispatch_unclaimed(now=timezone.now()).found == 0  # touched: not sent again
