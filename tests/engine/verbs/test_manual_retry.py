"""A manual retry gives a failed unit a whole fresh set of attempts, with the policy's backoff.

With a three-attempt policy, attempts 1-3 fail and the run fails; after ``retry_step``
(or ``retry_run``) attempts 4, 5 and 6 run, waiting the policy's first and second
intervals between them, exactly as attempts 1-3 did.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import BOOM
from workflows import FanOut, Retry, Task, Workflow
from workflows.models import CompensationRecord, FanOutItem, Step, Timer
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.verbs.test_manual_retry"
POLICY = Retry(max_attempts=3, initial_interval=timedelta(seconds=100), backoff=2.0)
SUCCEEDS_ON = 6


def fails_until_sixth(ctx: Any) -> str:
    if ctx.attempt < SUCCEEDS_ON:
        raise RuntimeError(f"attempt {ctx.attempt} failed")
    return f"done on attempt {ctx.attempt}"


def fails_until_sixth_item(ctx: Any) -> str:
    return fails_until_sixth(ctx)


class Stubborn(Workflow):
    name = "manual_retry_stubborn"
    work = Task(f"{HERE}.fails_until_sixth", retry=POLICY)


class StubbornItems(Workflow):
    name = "manual_retry_stubborn_items"
    each = FanOut(f"{HERE}.fails_until_sixth_item", items=lambda ctx: ["a"], retry=POLICY)


def retry_delays(step: Step, **unit: Any) -> list[float]:
    """The backoff of each retry timer armed for the step (or one of its units)."""
    timers = Timer.objects.filter(step=step, kind="retry", **unit).order_by("id")
    return [round((t.due_at - t.created_at).total_seconds()) for t in timers]


def run_until_quiet() -> None:
    run_pending(until=timezone.now() + timedelta(days=1))


@pytest.mark.parametrize("verb", ["retry_step", "retry_run"])
def test_a_manual_retry_gives_the_whole_policy_again(verb):
    run = workflows.start_run(Stubborn)
    run_until_quiet()
    step = Step.objects.get(run=run)
    assert (step.status, step.attempt) == ("failed", 3)
    assert retry_delays(step) == [100, 200]

    if verb == "retry_step":
        workflows.retry_step(step)
    else:
        workflows.retry_run(run)
    run_until_quiet()

    step.refresh_from_db()
    run.refresh_from_db()
    assert (step.status, step.attempt, step.output) == ("completed", 6, "done on attempt 6")
    assert run.status == "completed"
    assert retry_delays(step) == [100, 200, 100, 200]
    # The events number the attempts within each round, as every surface does; the
    # handler's ctx.attempt (and the fence) count on across rounds.
    started = run.events.filter(type="step.started").values_list("payload__attempt", flat=True)
    assert list(started) == [1, 2, 3, 1, 2, 3]


def always_fails(ctx: Any) -> None:
    raise RuntimeError(f"attempt {ctx.attempt} failed")


class Hopeless(Workflow):
    name = "manual_retry_hopeless"
    work = Task(f"{HERE}.always_fails", retry=POLICY)


def test_a_retried_step_that_keeps_failing_fails_after_its_fresh_set():
    run = workflows.start_run(Hopeless)
    run_until_quiet()
    step = Step.objects.get(run=run)
    workflows.retry_step(step)
    step.refresh_from_db()
    assert (step.status, step.max_attempts) == ("ready", 6)
    run_until_quiet()
    step.refresh_from_db()
    run.refresh_from_db()
    assert (step.status, step.attempt, run.status) == ("failed", 6, "failed")
    assert step.error["message"] == "attempt 6 failed"


def test_retried_fanout_items_get_a_fresh_set_too():
    run = workflows.start_run(StubbornItems)
    run_until_quiet()
    item = FanOutItem.objects.get(step__run=run)
    assert (item.status, item.attempt) == ("failed", 3)
    workflows.retry_run(run)
    run_until_quiet()
    item.refresh_from_db()
    run.refresh_from_db()
    assert (item.status, item.attempt, run.status) == ("completed", 6, "completed")
    assert retry_delays(item.step, item=item) == [100, 200, 100, 200]


def test_retried_compensations_get_the_default_policy_again(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "DEFAULT_MAX_ATTEMPTS": 2}
    run = workflows.start_run(Undoable)
    run_until_quiet()
    record = CompensationRecord.objects.get(run=run)
    run.refresh_from_db()
    assert (run.status, record.status, record.attempt) == ("compensation_failed", "failed", 2)
    workflows.retry_run(run)
    record.refresh_from_db()
    assert (record.status, record.max_attempts) == ("ready", 4)
    run_until_quiet()
    record.refresh_from_db()
    assert (record.status, record.attempt) == ("failed", 4)


def done(ctx: Any) -> str:
    return "done"


def undo_fails(ctx: Any) -> None:
    raise RuntimeError("cannot undo")


class Undoable(Workflow):
    name = "manual_retry_undoable"
    first = Task(f"{HERE}.done", compensate=f"{HERE}.undo_fails")
    second = Task(BOOM)
