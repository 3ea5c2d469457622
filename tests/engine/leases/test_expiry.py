"""The renewal rule: a heartbeat renews only a live lease, on the database clock.

A heartbeat after the lease expired raises ``LeaseExpired`` (a ``LeaseLost``) even
before the reclaim, and writes nothing, before or after the reclaim; the reclaim records
the attempt as ``lease_expired``. A late duplicate of a completion that committed is a
no-op reported as such; a result of a stale attempt is ``LeaseLost``. A unit's
``started_at`` is its first claim's; each attempt's start is its ``step.started`` event.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

import workflows
from tests.support.handlers import NOOP
from workflows import FanOut, LeaseExpired, LeaseLost, Retry, Task, Workflow
from workflows.engine import ITEM, STEP, claim, claim_step, fail_attempt, heartbeat, reclaim
from workflows.engine.outcomes import complete_work, heartbeat_batch, record_completion
from workflows.models import Event, FanOutItem, Frame, Step
from workflows.workers.runner import execute_step, run_attempt

pytestmark = pytest.mark.django_db

HERE = "tests.engine.leases.test_expiry"
TIMEOUT = timedelta(seconds=30)


def stalls_once(ctx):
    """The first attempt stalls past its lease, then heartbeats; the next one returns."""
    if ctx.attempt == 1:
        ctx.log("working")  # pending: the heartbeat's flush would write it
        expire(Step.objects.filter(run_id=ctx.run_id, name=ctx.step_name))
        ctx.heartbeat()
        return {"reached": "after a refused heartbeat"}
    return {"attempt": ctx.attempt}


def item_handler(ctx):
    return ctx.item


def items(ctx):
    return [0, 1, 2]


class Expiring(Workflow):
    name = "expiry_expiring"
    work = Task(NOOP, timeout=TIMEOUT, retry=Retry(max_attempts=3))
    then = Task(NOOP)


class Patient(Workflow):
    """A lease long enough to outlast a race's process start (tests/acceptance)."""

    name = "expiry_patient"
    work = Task(NOOP, timeout=timedelta(hours=1), retry=Retry(max_attempts=3))


class Stalling(Workflow):
    name = "expiry_stalling"
    work = Task(f"{HERE}.stalls_once", timeout=TIMEOUT, retry=Retry(max_attempts=2))


class StallingInTransaction(Workflow):
    name = "expiry_stalling_tx"
    work = Task(
        f"{HERE}.stalls_once", timeout=TIMEOUT, retry=Retry(max_attempts=2), transactional=True
    )


class Batched(Workflow):
    name = "expiry_batched"
    fan = FanOut(f"{HERE}.item_handler", items=items, batch_size=3, max_parallel=3, timeout=TIMEOUT)


def expire(rows, ago: timedelta = timedelta(seconds=1)) -> None:
    """Move the rows' lease into the past (within the reclaim's grace), version untouched:
    as if their worker had stalled."""
    rows.update(lease_expires_at=timezone.now() - ago)


def started(run) -> list[tuple[int, str]]:
    return [
        (event.payload["attempt"], event.payload["owner"])
        for event in Event.objects.filter(run=run, type="step.started").order_by("id")
    ]


def test_a_heartbeat_after_expiry_raises_lease_expired_and_writes_nothing():
    run = workflows.start_run(Expiring)
    lease = claim_step(run.steps.get(name="work").pk, "worker-a")
    expire(Step.objects.filter(pk=lease.unit_id))
    before = Step.objects.values().get(pk=lease.unit_id)
    events = Event.objects.count()

    with pytest.raises(LeaseExpired) as refused:
        heartbeat(lease)
    assert isinstance(refused.value, LeaseLost)
    assert refused.value.code == "lease_expired"
    assert "its lease expired" in str(refused.value)
    assert Step.objects.values().get(pk=lease.unit_id) == before
    assert Event.objects.count() == events

    # The reclaim is what records the attempt, as lease_expired.
    assert reclaim(STEP, lease.unit_id, now=timezone.now() + timedelta(seconds=5)) == "ready"
    step = Step.objects.get(pk=lease.unit_id)
    assert (step.status, step.failure_class, step.attempt) == ("ready", "lease_expired", 1)
    [expired] = Event.objects.filter(run=run, type="lease.expired")
    assert (expired.payload["attempt"], expired.payload["owner"]) == (1, "worker-a")

    # After the reclaim, the stalled worker's heartbeat still writes nothing...
    with pytest.raises(LeaseExpired):
        heartbeat(lease)
    assert not Event.objects.filter(run=run, type="lease.lost").exists()

    # ...until a later attempt began: then it is an ordinary lost lease, recorded.
    claim_step(lease.unit_id, "worker-b")
    with pytest.raises(LeaseLost) as lost:
        heartbeat(lease)
    assert not isinstance(lost.value, LeaseExpired)
    [recorded] = Event.objects.filter(run=run, type="lease.lost")
    assert (recorded.payload["action"], recorded.payload["current"]["attempt"]) == ("heartbeat", 2)


def test_the_expiry_check_is_in_the_heartbeats_update_and_costs_no_statement():
    run = workflows.start_run(Expiring)
    lease = claim_step(run.steps.get(name="work").pk, "worker-a")
    heartbeat(lease)  # warm: the first call may read what later ones have cached
    with CaptureQueriesContext(connection) as live:
        heartbeat(lease)
    [update] = [query["sql"] for query in live.captured_queries if "UPDATE" in query["sql"]]
    assert '"lease_expires_at" >' in update
    expire(Step.objects.filter(pk=lease.unit_id))
    with CaptureQueriesContext(connection) as expired, pytest.raises(LeaseExpired):
        heartbeat(lease)
    # A live heartbeat is its fenced update and the read of its run (is it cancelled?),
    # as before the rule; a refused one reads the row once more, to tell an expiry from
    # a loss.
    assert len(statements(live)) == 2
    assert len(statements(expired)) == 3


def statements(captured: CaptureQueriesContext) -> list[str]:
    """The statements captured, transaction control left out."""
    return [
        query["sql"]
        for query in captured.captured_queries
        if "SAVEPOINT" not in query["sql"] and query["sql"] not in ("BEGIN", "COMMIT")
    ]


def test_a_live_lease_past_its_worker_s_clock_is_still_renewed():
    run = workflows.start_run(Expiring)
    lease = claim_step(run.steps.get(name="work").pk, "worker-a")
    soon = timezone.now() + timedelta(seconds=2)
    Step.objects.filter(pk=lease.unit_id).update(lease_expires_at=soon)
    heartbeat(lease)
    assert Step.objects.get(pk=lease.unit_id).lease_expires_at > soon + timedelta(seconds=20)


@pytest.mark.parametrize("workflow", [Stalling, StallingInTransaction], ids=["plain", "tx"])
def test_a_worker_that_stalled_past_its_lease_stops_logs_and_writes_nothing(workflow, caplog):
    """Not even the log lines its heartbeat would have flushed first."""
    run = workflows.start_run(workflow)
    step = run.steps.get(name="work")
    with caplog.at_level(logging.WARNING, logger="workflows.runner"):
        assert execute_step(step.pk, owner="worker-a", chain=False) == 1
    assert any("its lease expired" in record.getMessage() for record in caplog.records)
    step.refresh_from_db()
    assert (step.status, step.attempt, step.lease_owner, step.output) == (
        "running",
        1,
        "worker-a",
        None,
    )
    assert not Event.objects.filter(run=run, type__in=("lease.lost", "step.failed")).exists()
    assert (step.frames_written, Frame.objects.filter(step=step).count()) == (0, 0)

    later = step.lease_expires_at + timedelta(seconds=5)
    assert reclaim(STEP, step.pk, now=later) == "ready"
    execute_step(step.pk, owner="worker-b", chain=False)
    step.refresh_from_db()
    assert (step.status, step.output) == ("completed", {"attempt": 2})
    assert step.error["failure_class"] == "lease_expired"
    assert started(run) == [(1, "worker-a"), (2, "worker-b")]


def test_a_batch_heartbeat_drops_expired_items_without_recording_them():
    run = workflows.start_run(Batched)
    first = FanOutItem.objects.filter(step__run=run, status="ready").order_by("index")[0]
    batch = claim(ITEM, first.pk, "worker-a")
    expired, caller, other = sorted(batch.leases, key=lambda lease: lease.item_key)
    expire(FanOutItem.objects.filter(pk=expired.unit_id))
    heartbeat_batch(batch, caller=caller)
    assert [lease.item_key for lease in batch.leases] == [caller.item_key, other.item_key]
    assert not Event.objects.filter(run=run, type="lease.lost").exists()

    expire(FanOutItem.objects.filter(pk=caller.unit_id))
    with pytest.raises(LeaseExpired):
        heartbeat_batch(batch, caller=caller)
    assert [lease.item_key for lease in batch.leases] == [other.item_key]
    run_attempt(batch, chain=False)
    statuses = dict(FanOutItem.objects.filter(step__run=run).values_list("key", "status"))
    assert statuses == {"0": "running", "1": "running", "2": "completed"}
    assert not Event.objects.filter(run=run, type="lease.lost").exists()


def test_a_late_duplicate_completion_is_a_reported_no_op():
    run = workflows.start_run(Expiring)
    lease = claim_step(run.steps.get(name="work").pk, "worker-a")
    retried = dataclasses.replace(lease)  # the completion, sent again unacknowledged
    complete_work(lease, {"n": 1})
    before = Step.objects.values().get(pk=lease.unit_id)
    events = Event.objects.count()

    assert record_completion(dataclasses.replace(retried), {"n": 1}).duplicate
    assert complete_work(dataclasses.replace(retried), {"n": 1}) is None
    assert Step.objects.values().get(pk=lease.unit_id) == before
    assert Event.objects.count() == events

    # Another output for the same attempt is no duplicate: it is rejected.
    with pytest.raises(LeaseLost) as lost:
        record_completion(dataclasses.replace(retried), {"n": 2})
    assert lost.value.code == "lease_lost"
    assert Event.objects.filter(run=run, type="lease.lost").count() == 1
    assert Step.objects.get(pk=lease.unit_id).output == {"n": 1}


def test_a_result_of_a_stale_attempt_is_lease_lost_even_with_the_same_output():
    run = workflows.start_run(Expiring)
    stale = claim_step(run.steps.get(name="work").pk, "worker-a")
    assert reclaim(STEP, stale.unit_id, now=timezone.now() + timedelta(minutes=5)) == "ready"
    fresh = claim_step(stale.unit_id, "worker-b")
    assert not record_completion(fresh, {"n": 1}).duplicate
    with pytest.raises(LeaseLost) as lost:
        record_completion(stale, {"n": 1})
    assert not isinstance(lost.value, LeaseExpired)
    [recorded] = Event.objects.filter(run=run, type="lease.lost")
    assert recorded.payload["action"] == "completion"


def test_started_at_is_the_first_claim_s_and_each_attempt_s_start_is_its_event(admin_user):
    run = workflows.start_run(Expiring)
    step = run.steps.get(name="work")
    first = claim_step(step.pk, "worker-a")
    started_at = Step.objects.get(pk=step.pk).started_at
    assert started_at is not None

    fail_attempt(first, RuntimeError("flaky"))  # retried after a backoff
    Step.objects.filter(pk=step.pk).update(status="ready")  # as the retry timer does
    second = claim_step(step.pk, "worker-b")
    expire(Step.objects.filter(pk=step.pk))
    assert reclaim(STEP, step.pk, now=timezone.now() + timedelta(seconds=5)) == "ready"
    claim_step(step.pk, "worker-c")
    step.refresh_from_db()
    assert (step.attempt, step.started_at) == (3, started_at)
    assert second.attempt == 2

    expected = [(1, "worker-a"), (2, "worker-b"), (3, "worker-c")]
    assert started(run) == expected
    client = APIClient()
    client.force_authenticate(admin_user)
    events = client.get(f"/api/runs/{run.pk}/events/").json()["results"]
    listed = [
        (event["payload"]["attempt"], event["payload"]["owner"], event["created_at"])
        for event in events
        if event["type"] == "step.started"
    ]
    assert [(attempt, owner) for attempt, owner, _ in listed] == expected
    assert [at for _, _, at in listed] == sorted(at for _, _, at in listed)
