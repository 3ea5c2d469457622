"""The worker's watchdog: a handler that runs past its node's timeout while its worker
lives is recorded as ``timeout`` at once, its late result refused, without waiting for
the lease scanner.

Real time, real threads: each test commits (``transaction=True``) so that the
watchdog's own connection sees the attempt. A handler that must overrun waits for the
watchdog's record (or gives up after ``GIVE_UP`` seconds, failing the test), so no
assertion depends on how long anything took.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

import workflows
from tests.support.events import payloads
from tests.support.runs import claimed
from tests.support.threads import eventually
from workflows import FanOut, Retry, Task, Workflow
from workflows.engine import ITEM, STEP, claim, heartbeat, reclaim
from workflows.engine.lease import LeaseBatch
from workflows.engine.recovery import return_unstarted
from workflows.models import FanOutItem, Step
from workflows.testing import run_pending
from workflows.workers.runner import execute
from workflows.workers.scanners import reclaim_expired_leases
from workflows.workers.watchdog import deadline_of, watchdog

pytestmark = pytest.mark.django_db(transaction=True)

HERE = "tests.workers.test_watchdog"
GIVE_UP = 30.0
SECOND = timedelta(seconds=1)
# Timeouts retried: these tests follow an attempt after the one that timed out.
RETRY = Retry(
    max_attempts=3,
    initial_interval=timedelta(milliseconds=10),
    retry_on={"transient", "timeout", "lease_expired"},
)
# Notes of the handlers: what they saw.
SEEN: list[object] = []


@pytest.fixture(autouse=True)
def _reset():
    SEEN.clear()


def wait_until(done: Callable[[], bool]) -> bool:
    return eventually(done, timeout=GIVE_UP, every=0.02)


def overruns(ctx):
    """Attempt 1 runs on until its row says it is no longer running (the watchdog)."""
    if ctx.attempt == 1:
        SEEN.append(
            wait_until(
                lambda: (
                    not Step.objects.filter(
                        run_id=ctx.run_id, name=ctx.step_name, status="running"
                    ).exists()
                )
            )
        )
    return {"attempt": ctx.attempt}


def item_overruns(ctx):
    """Item 0's first attempt runs on until its row is no longer running."""
    if ctx.item == "slow" and ctx.attempt == 1:
        SEEN.append(
            wait_until(
                lambda: (
                    not FanOutItem.objects.filter(
                        step__run_id=ctx.run_id, index=0, status="running"
                    ).exists()
                )
            )
        )
    return ctx.item


def reclaimed_first(ctx):
    """The lease scanner takes the attempt before its deadline; the watchdog then loses."""
    step = Step.objects.get(run_id=ctx.run_id, name=ctx.step_name)
    SEEN.append(reclaim(STEP, step.pk, now=timezone.now() + timedelta(hours=1)))
    SEEN.append(wait_until(lambda: watchdog().watching() == 0))
    return "late"


def writes_slowly(ctx):
    """A transactional handler: writes a row, then runs past its timeout."""
    SEEN.append(watchdog().watching())
    User.objects.create(username=f"written-by-attempt-{ctx.attempt}")
    if ctx.attempt == 1:
        time.sleep(1.5)
    return ctx.attempt


class Overrun(Workflow):
    name = "watchdog_overrun"
    slow = Task(f"{HERE}.overruns", timeout=SECOND, retry=RETRY)


class OverrunOnce(Workflow):
    name = "watchdog_overrun_once"
    slow = Task(f"{HERE}.overruns", timeout=SECOND, retry=Retry(retry_on={"transient"}))


class ReclaimedFirst(Workflow):
    name = "watchdog_reclaimed_first"
    slow = Task(f"{HERE}.reclaimed_first", timeout=SECOND, retry=RETRY)


class Batched(Workflow):
    name = "watchdog_batched"
    spread = FanOut(
        f"{HERE}.item_overruns",
        items=lambda ctx: ["slow", "a", "b"],
        batch_size=3,
        timeout=SECOND,
        retry=RETRY,
    )


class Transactional(Workflow):
    name = "watchdog_transactional"
    book = Task(f"{HERE}.writes_slowly", timeout=SECOND, retry=RETRY, transactional=True)


def test_a_handler_past_its_timeout_is_recorded_as_timeout_and_its_late_result_refused():
    run = workflows.start_run(Overrun)
    step = Step.objects.get(run=run, name="slow")
    assert execute(STEP, step.pk, owner="worker-a", chain=False) == 1
    assert SEEN == [True]  # the watchdog recorded it while the handler still ran

    step.refresh_from_db()
    assert (step.status, step.attempt, step.output) == ("retry_scheduled", 1, None)
    assert step.failure_class == "timeout"
    assert step.error["failure_class"] == "timeout"
    assert step.error["type"] == "workflows.engine.failures.AttemptTimedOut"
    assert "ran past its timeout of 1s" in step.error["message"]
    [scheduled] = payloads(run, "step.retry_scheduled")
    assert scheduled["failure_class"] == "timeout"
    [lost] = payloads(run, "lease.lost")
    assert (lost["action"], lost["attempt"]) == ("completion", 1)
    assert payloads(run, "lease.expired") == []
    assert watchdog().watching() == 0

    run_pending(until=timezone.now() + timedelta(hours=1))
    step.refresh_from_db()
    assert (step.status, step.output) == ("completed", {"attempt": 2})


def test_a_timeout_left_out_of_retry_on_fails_the_step_for_good():
    run = workflows.start_run(OverrunOnce)
    step = Step.objects.get(run=run, name="slow")
    execute(STEP, step.pk, owner="worker-a", chain=False)
    assert SEEN == [True]
    step.refresh_from_db()
    assert (step.status, step.attempt, step.max_attempts) == ("failed", 1, 3)
    assert step.failure_class == "timeout"
    [failed] = payloads(run, "step.failed")
    assert failed["failure_class"] == "timeout"
    run.refresh_from_db()
    assert run.status == "failed"


def test_a_watchdog_that_loses_to_a_reclaim_writes_nothing():
    run = workflows.start_run(ReclaimedFirst)
    step = Step.objects.get(run=run, name="slow")
    execute(STEP, step.pk, owner="worker-a", chain=False)
    assert SEEN == ["ready", True]  # reclaimed; then the watchdog gave the attempt up

    step.refresh_from_db()
    assert (step.status, step.attempt, step.failure_class) == ("ready", 1, "lease_expired")
    assert payloads(run, "step.retry_scheduled") == []
    # The worker's refused completion is the one lease.lost: none from the watchdog.
    assert [lost["action"] for lost in payloads(run, "lease.lost")] == ["completion"]


def test_a_heartbeat_moves_the_deadline_on():
    run = workflows.start_run(Overrun)
    lease = claimed(run, "slow", "worker-a")
    started = time.monotonic()
    first = deadline_of(lease, started)
    assert first == pytest.approx(started + 1.0)
    time.sleep(0.01)
    heartbeat(lease)
    assert deadline_of(lease, started) > first
    assert deadline_of(lease, started) == pytest.approx(lease.renewed_at + 1.0)


def test_each_item_of_a_batch_is_timed_alone():
    run = workflows.start_run(Batched)
    run_pending()
    assert SEEN == [True]
    items = {item.key: item for item in FanOutItem.objects.filter(step__run=run)}
    slow = items[next(key for key, item in items.items() if item.index == 0)]
    assert (slow.status, slow.attempt, slow.failure_class) == ("retry_scheduled", 1, "timeout")
    # Its siblings' leases ran out while it ran, before they started: the renewal
    # before the next item is refused (a lease is renewed only while live), and the
    # worker gives them back without counting the attempt; they run again as attempt 1.
    others = [item for item in items.values() if item.index != 0]
    for item in others:
        item.refresh_from_db()
    assert [(item.status, item.attempt, item.failure_class) for item in others] == [
        ("completed", 1, "")
    ] * 2
    returned = payloads(run, "item.returned")
    assert sorted((given["item"], given["attempt"]) for given in returned) == sorted(
        (item.key, 1) for item in others
    )
    assert payloads(run, "lease.expired") == []
    assert {lost["current"]["status"] for lost in payloads(run, "lease.lost")} == {
        "retry_scheduled"  # the slow item's own late writes; none of its siblings'
    }
    [scheduled] = payloads(run, "item.retry_scheduled")
    assert scheduled["failure_class"] == "timeout"

    run_pending(until=timezone.now() + timedelta(hours=1))
    run.refresh_from_db()
    assert run.status == "completed"


def test_an_item_given_back_is_left_alone_once_reclaimed():
    """The give-back is fenced: an item a reclaim took first keeps the reclaim's
    counted attempt, and nothing of the give-back is written."""
    run = workflows.start_run(Batched)
    first = FanOutItem.objects.filter(step__run=run, status="ready").order_by("index")[0]
    batch = claim(ITEM, first.pk, "worker-a")
    assert isinstance(batch, LeaseBatch)
    behind = batch.leases[1:]
    later = timezone.now() + timedelta(hours=1)
    assert reclaim_expired_leases(now=later).done == len(batch.leases)
    assert return_unstarted(behind) == set()
    for lease in behind:
        item = FanOutItem.objects.get(pk=lease.unit_id)
        assert (item.status, item.attempt, item.failure_class) == ("ready", 1, "lease_expired")
    assert payloads(run, "item.returned") == []


def test_a_transactional_handler_is_judged_when_it_returns_and_its_writes_roll_back():
    """Not watched (its transaction holds what the watchdog would wait for): its result,
    returned past the deadline, is refused as ``timeout`` and its row rolled back."""
    run = workflows.start_run(Transactional)
    step = Step.objects.get(run=run, name="book")
    execute(STEP, step.pk, owner="worker-a", chain=False)
    assert SEEN == [0]
    step.refresh_from_db()
    assert (step.status, step.failure_class) == ("retry_scheduled", "timeout")
    assert not User.objects.filter(username="written-by-attempt-1").exists()
    assert payloads(run, "lease.lost") == []

    run_pending(until=timezone.now() + timedelta(hours=1))
    step.refresh_from_db()
    assert (step.status, step.output) == ("completed", 2)
    assert User.objects.filter(username="written-by-attempt-2").exists()
