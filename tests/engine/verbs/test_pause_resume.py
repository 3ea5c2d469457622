"""Pause and resume: nothing new starts while paused; what runs is recorded; timers wait."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

import workflows
from tests.support.handlers import CALLS
from tests.support.runs import claimed
from workflows import FanOut, InvalidTransition, Retry, Sleep, StaleState, Task, Workflow
from workflows.engine import ITEM, claim, claim_step, complete_work, fail_attempt
from workflows.models import CompensationRecord, FanOutItem, Run, Step, Timer
from workflows.testing import run_pending
from workflows.workers.scanners import fire_due_timers, reclaim_expired_leases

HERE = "tests.engine.verbs.test_pause_resume"


def record(ctx: Any) -> str:
    CALLS.append(ctx.step_name)
    return ctx.step_name


def undo(ctx: Any) -> None:
    CALLS.append(f"undo {ctx.step_name}")


class Chain(Workflow):
    name = "pause_chain"
    first = Task(f"{HERE}.record", compensate=f"{HERE}.undo")
    second = Task(f"{HERE}.record")
    third = Task(f"{HERE}.record")


class Napping(Workflow):
    name = "pause_napping"
    nap = Sleep(timedelta(minutes=5))
    after_nap = Task(f"{HERE}.record")


class Spread(Workflow):
    name = "pause_spread"
    each = FanOut(f"{HERE}.record", items=lambda ctx: list(range(6)), max_parallel=2)
    done = Task(f"{HERE}.record")


class Flaky(Workflow):
    name = "pause_flaky"
    only = Task(f"{HERE}.record", retry=Retry(max_attempts=3))


def status_of(run: Run) -> str:
    run.refresh_from_db()
    return run.status


def steps_of(run: Run) -> dict[str, str]:
    return dict(Step.objects.filter(run=run).values_list("name", "status"))


@pytest.mark.django_db
def test_a_paused_run_starts_nothing_until_it_is_resumed():
    operator = User.objects.create_user("operator")
    run = workflows.start_run(Chain)
    workflows.pause_run(run, reason="supplier outage", user=operator)
    run.refresh_from_db()
    assert (run.status, run.paused_reason) == ("paused", "supplier outage")
    assert run_pending().steps == 0  # the ready step is not claimed
    with pytest.raises(StaleState, match="its run is paused"):
        claimed(run, "first", "worker")
    requested = run.events.get(type="run.pause_requested")
    assert requested.payload == {"by": "operator", "reason": "supplier outage"}

    workflows.resume_run(run, user=operator)
    run_pending()
    assert status_of(run) == "completed"
    assert CALLS == ["first", "second", "third"]
    assert run.events.filter(type="run.resume_requested").count() == 1


def resumed(run: Run) -> str:
    """Resume ``run``, run what is ready inline and return its status."""
    workflows.resume_run(run)
    run_pending()
    return status_of(run)


@pytest.mark.django_db
def test_work_running_when_paused_finishes_and_is_recorded_and_nothing_follows():
    run = workflows.start_run(Chain)
    lease = claimed(run, "first", "worker")
    workflows.pause_run(run)
    assert complete_work(lease, "first", claim_next=True) is None  # chains into nothing
    assert steps_of(run) == {"first": "completed", "second": "pending", "third": "pending"}
    assert CompensationRecord.objects.filter(run=run).count() == 1  # recorded, not run
    assert status_of(run) == "paused"
    assert resumed(run) == "completed"


@pytest.mark.django_db
def test_timers_due_while_paused_wait_and_fire_once_after_the_resume():
    run = workflows.start_run(Napping)
    workflows.pause_run(run)
    later = timezone.now() + timedelta(minutes=10)
    assert fire_due_timers(now=later).found == 0  # the sweeper does not even look
    run_pending(until=later)
    timer = Timer.objects.get(run=run, kind="sleep")
    assert timer.status == "scheduled"
    assert steps_of(run)["nap"] == "waiting"

    workflows.resume_run(run)
    run_pending(until=later)
    assert status_of(run) == "completed"
    timer.refresh_from_db()
    assert timer.status == "fired"
    assert run.events.filter(type="timer.fired").count() == 1


@pytest.mark.django_db
def test_a_retry_scheduled_while_paused_fires_after_the_resume():
    run = workflows.start_run(Flaky)
    lease = claim_step(Step.objects.get(run=run).pk, "worker")
    workflows.pause_run(run)
    assert fail_attempt(lease, RuntimeError("blip")) == "retry_scheduled"
    run_pending(until=timezone.now() + timedelta(hours=1))
    assert steps_of(run) == {"only": "retry_scheduled"}
    workflows.resume_run(run)
    run_pending(until=timezone.now() + timedelta(hours=1))
    assert status_of(run) == "completed"
    assert Step.objects.get(run=run).attempt == 2


@pytest.mark.django_db
def test_a_step_failing_for_good_while_paused_fails_the_run_on_resume():
    run = workflows.start_run(Chain)
    lease = claimed(run, "first", "worker")
    complete_work(lease, "first")
    second = claimed(run, "second", "worker")
    workflows.pause_run(run)
    fail_attempt(second, workflows.PermanentError("bad data"))
    assert status_of(run) == "paused"
    assert CALLS == []  # no compensation starts while paused
    workflows.resume_run(run)
    run_pending()
    run.refresh_from_db()
    assert run.status == "compensated"
    assert run.error["step"] == "second"
    assert CALLS == ["undo first"]


@pytest.mark.django_db
def test_a_lease_expiring_while_paused_returns_the_work_to_ready_for_the_resume():
    run = workflows.start_run(Chain)
    claimed(run, "first", "dead-worker")
    workflows.pause_run(run)
    Step.objects.filter(run=run, name="first").update(
        lease_expires_at=timezone.now() - timedelta(minutes=1)
    )
    assert reclaim_expired_leases().done == 1
    assert steps_of(run)["first"] == "ready"
    assert resumed(run) == "completed"


@pytest.mark.django_db
def test_a_fanout_paused_mid_way_releases_no_item_and_finishes_after_the_resume():
    run = workflows.start_run(Spread)
    first = FanOutItem.objects.filter(step__run=run, status="ready").order_by("index").first()
    lease = claim(ITEM, first.pk, "worker")
    workflows.pause_run(run)
    complete_work(lease, 0, claim_next=True)
    assert FanOutItem.objects.filter(step__run=run, status="ready").count() == 1
    assert FanOutItem.objects.filter(step__run=run, status="pending").count() == 4
    assert resumed(run) == "completed"
    assert Step.objects.get(run=run, name="each").output == [0, *["each"] * 5]


@pytest.mark.django_db
def test_pause_and_resume_refuse_runs_in_other_states_saying_why():
    run = workflows.start_run(Chain)
    with pytest.raises(InvalidTransition, match="run is running; resume needs paused"):
        workflows.resume_run(run)
    run_pending()
    with pytest.raises(
        InvalidTransition, match="run is completed; pause needs pending, running, waiting"
    ):
        workflows.pause_run(run)


@pytest.mark.django_db
def test_a_paused_run_can_be_cancelled():
    run = workflows.start_run(Chain)
    run_pending()  # completed; start another that pauses mid-way
    run = workflows.start_run(Chain, {"again": 1})
    lease = claimed(run, "first", "worker")
    complete_work(lease, "first")
    workflows.pause_run(run)
    workflows.cancel_run(run, reason="give up")
    run_pending()
    assert status_of(run) == "cancelled"


@pytest.mark.django_db
def test_the_commands_pause_and_resume_a_run_named_by_a_prefix_or_business_key(capsys):
    run = workflows.start_run(Chain, business_key="order-77")
    call_command("workflows_pause", str(run.pk)[:8], "--reason", "audit")
    assert "paused" in capsys.readouterr().out
    call_command("workflows_resume", "--business-key", "order-77")
    assert status_of(run) == "running"


@pytest.mark.django_db(transaction=True)
def test_pause_racing_a_completion_never_loses_or_repeats_work(concurrently):
    for round_number in range(5):
        run = workflows.start_run(Chain, {"round": round_number})
        lease = claimed(run, "first", "worker")
        results = concurrently(
            partial(complete_work, lease, "first", claim_next=True),
            partial(workflows.pause_run, run),
        )
        assert not any(isinstance(result, Exception) for result in results), results
        assert status_of(run) == "paused"
        following = results[0]
        if following is not None:  # the completion won: its chained claim is in flight
            complete_work(following, "second")
        workflows.resume_run(run)
        run_pending()
        assert status_of(run) == "completed"
        started = run.events.filter(type="step.started").values_list("step__name", flat=True)
        assert sorted(started) == ["first", "second", "third"]
