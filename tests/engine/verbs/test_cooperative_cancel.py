"""Cooperative cancel: a running handler learns that its run was cancelled, terminated or
passed its deadline (``ctx.cancel_requested``, ``ctx.heartbeat()`` raising
``RunCancelled``), and its attempt is recorded as failed with class ``cancelled``; and a
second cancel is a no-op."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import CALLS, UNDO, UNDONE, WORK
from workflows import FanOut, InvalidTransition, LeaseLost, Retry, RunCancelled, Task, Workflow
from workflows.context import Context
from workflows.engine import COMPENSATION, ITEM, STEP, claim, claim_step, heartbeat
from workflows.engine.cancellation import cancel_requested
from workflows.engine.lease import Lease, LeaseBatch
from workflows.engine.outcomes import heartbeat_batch
from workflows.models import Event, FanOutItem, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.verbs.test_cooperative_cancel"


def cancels_then_beats(ctx: Context) -> str:
    """Looks, has its own run cancelled (as an operator would meanwhile), looks again and
    heartbeats: the heartbeat raises RunCancelled and nothing after it runs."""
    CALLS.append(f"before: {ctx.cancel_requested}")
    workflows.cancel_run(ctx.run_id, reason="customer gone")
    CALLS.append(f"after: {ctx.cancel_requested}")
    ctx.heartbeat()
    CALLS.append("went on")
    return "finished anyway"


def terminates_then_beats(ctx: Context) -> str:
    workflows.terminate_run(ctx.run_id)
    CALLS.append(f"terminated: {ctx.cancel_requested}")
    ctx.heartbeat()
    CALLS.append("went on")
    return "finished anyway"


def undo_and_look(ctx: Context) -> None:
    """A compensation of a cancelled run: it is what the cancel asked for, not stopped."""
    CALLS.append(f"undo sees cancel: {ctx.cancel_requested}")
    ctx.heartbeat()
    UNDONE.append(ctx.step_name)


class Cancelled(Workflow):
    name = "coop_cancelled"
    reserve = Task(WORK, compensate=f"{HERE}.undo_and_look")
    work = Task(f"{HERE}.cancels_then_beats", retry=Retry(max_attempts=3))


class Terminated(Workflow):
    name = "coop_terminated"
    work = Task(f"{HERE}.terminates_then_beats", retry=Retry(max_attempts=3))


class Plain(Workflow):
    name = "coop_plain"
    work = Task(WORK, compensate=UNDO)


class Batched(Workflow):
    name = "coop_batched"
    ship = FanOut(WORK, items=lambda ctx: [1, 2, 3], batch_size=3)


def step_of(run: Run, name: str = "work") -> Step:
    return Step.objects.get(run=run, name=name)


def test_a_heartbeat_after_cancel_raises_run_cancelled_and_the_attempt_ends_cancelled():
    run = workflows.start_run(Cancelled)
    run_pending()
    # It stopped at the heartbeat; then the compensation ran, and was not asked to stop.
    assert CALLS == ["before: False", "after: True", "undo sees cancel: False"]
    work = step_of(run)
    assert (work.status, work.attempt, work.failure_class) == ("failed", 1, "cancelled")
    assert work.error["failure_class"] == "cancelled"
    assert "run is cancelling" in work.error["message"]
    run.refresh_from_db()
    assert run.status == "cancelled"  # never retried; the compensation ran, not stopped
    assert UNDONE == ["reserve"]


def test_a_heartbeat_after_terminate_raises_run_cancelled_not_plain_lease_lost():
    run = workflows.start_run(Terminated)
    run_pending()
    assert CALLS == ["terminated: True"]
    work = step_of(run)
    assert work.status == "cancelled"  # the terminate took the lease; nothing else wrote
    assert Run.objects.get(pk=run.pk).status == "terminated"
    assert Event.objects.filter(run=run, type="lease.lost").exists()


def test_cancel_requested_and_heartbeat_on_a_held_lease():
    run = workflows.start_run(Plain)
    lease = claim_step(step_of(run).pk, "worker")
    assert isinstance(lease, Lease)
    assert not cancel_requested(lease.kind, run.pk)
    heartbeat(lease)  # nothing asked yet

    workflows.cancel_run(run)

    assert cancel_requested(lease.kind, run.pk)
    with pytest.raises(
        RunCancelled, match="step 'work' attempt 1 asked to stop: run is cancelling"
    ):
        heartbeat(lease)
    # The lease is still held (a cancel leaves running attempts running): the heartbeat
    # extended it before saying so.
    assert step_of(run).status == "running"
    assert not Event.objects.filter(run=run, type="lease.lost").exists()
    assert issubclass(RunCancelled, LeaseLost) and RunCancelled.code == "run_cancelled"


def test_a_run_past_its_deadline_asks_its_attempts_to_stop():
    run = workflows.start_run(Plain)
    lease = claim_step(step_of(run).pk, "worker")
    assert isinstance(lease, Lease)
    Run.objects.filter(pk=run.pk).update(deadline=timezone.now() + timedelta(hours=1))
    assert not cancel_requested(lease.kind, run.pk)
    Run.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    assert cancel_requested(lease.kind, run.pk)
    with pytest.raises(RunCancelled, match="run is past its deadline"):
        heartbeat(lease)


def test_a_run_failed_by_its_deadline_asks_forward_work_to_stop_but_not_compensations():
    """Compensations are what a cancelled run, or one that missed its deadline, runs
    next: only a terminate stops them."""
    run = workflows.start_run(Plain)
    Run.objects.filter(pk=run.pk).update(
        status="compensating", error={"code": "deadline_exceeded", "message": "late"}
    )
    assert cancel_requested(STEP, run.pk) and cancel_requested(ITEM, run.pk)
    assert not cancel_requested(COMPENSATION, run.pk)
    Run.objects.filter(pk=run.pk).update(status="cancelling", error=None)
    assert not cancel_requested(COMPENSATION, run.pk)
    Run.objects.filter(pk=run.pk).update(status="terminated")
    assert cancel_requested(COMPENSATION, run.pk)
    Run.objects.filter(pk=run.pk).update(status="compensating", error={"code": "step_failed"})
    assert not cancel_requested(STEP, run.pk)  # an ordinary failure asks nothing


def test_the_batch_heartbeat_tells_the_calling_item_to_stop():
    run = workflows.start_run(Batched)
    first = FanOutItem.objects.filter(step__run=run).order_by("index").first()
    assert first is not None
    batch = claim(ITEM, first.pk, "worker")
    assert isinstance(batch, LeaseBatch) and len(batch.leases) == 3
    heartbeat_batch(batch, caller=batch.leases[0])
    workflows.cancel_run(run)
    heartbeat_batch(batch)  # the worker's own renewal between items asks nothing
    with pytest.raises(RunCancelled):
        heartbeat_batch(batch, caller=batch.leases[1])


def test_cancel_requested_outside_a_handler_says_so():
    ctx = Context(run_id=Run().pk, input={}, step_names=())
    with pytest.raises(workflows.WorkflowError, match="only available inside a running handler"):
        _ = ctx.cancel_requested


# -- a second cancel --------------------------------------------------------------------


def snapshot(run: Run) -> tuple[Any, ...]:
    run.refresh_from_db()
    return (run.status, run.version, run.error, run.events.count())


@pytest.mark.parametrize("first", ["cancel", "terminate"])
def test_cancelling_a_cancelled_or_terminated_run_changes_nothing(first):
    run = workflows.start_run(Plain)
    lease = claim_step(step_of(run).pk, "worker")
    assert lease is not None
    getattr(workflows, f"{first}_run")(run)
    before = snapshot(run)
    assert before[0] == ("cancelling" if first == "cancel" else "terminated")

    again = workflows.cancel_run(run, reason="again", compensate=False)

    assert again.status == before[0]
    assert snapshot(run) == before  # no event, no new version
    result = workflows.services.request_cancel(run)
    assert (result.already, result.run.status) == (True, before[0])


def test_a_first_cancel_says_it_was_not_cancelled_before_and_others_are_still_refused():
    run = workflows.start_run(Plain)
    result = workflows.services.request_cancel(run, reason="first")
    assert (result.already, result.run.status) == (False, "cancelled")
    done = workflows.start_run(Plain)
    run_pending()
    before = snapshot(done)
    with pytest.raises(InvalidTransition, match="run is completed; cancel needs"):
        workflows.cancel_run(done)
    assert snapshot(done) == before
