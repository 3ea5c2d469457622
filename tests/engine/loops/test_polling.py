"""Polling tasks: ``Task(repeat_until=, every=, max_iterations=)`` runs again after a
durable sleep (a ``repeat`` timer row) until its condition says done, with time travel
through ``run_pending(until=...)`` instead of real sleeping."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import CALLS, NOOP
from tests.support.runs import run_inline
from workflows import Loop, Retry, Task, Workflow
from workflows.models import Run, Step, StepIteration, Timer
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.loops.test_polling"
EVERY = timedelta(minutes=5)


def check(ctx):
    """The outside system answers ``done`` on the third poll."""
    CALLS.append(ctx.idempotency_key)
    return {"poll": ctx.iteration, "state": "done" if ctx.iteration == 3 else "busy"}


def done(ctx) -> bool:
    return ctx.steps["wait"].output["state"] == "done"


def never(ctx) -> bool:
    return False


def broken(ctx) -> bool:
    raise ValueError("status page unreadable")


def report(ctx):
    wait = ctx.steps["wait"]
    return {"last": wait.output, "polls": [poll and poll["poll"] for poll in wait.iterations]}


class Polled(Workflow):
    name = "poll_until_done"
    wait = Task(f"{HERE}.check", repeat_until=done, every=EVERY, max_iterations=5)
    report = Task(f"{HERE}.report")


class PollsOutFailing(Workflow):
    name = "poll_exhausted_fail"
    wait = Task(f"{HERE}.check", repeat_until=never, every=EVERY, max_iterations=2)
    report = Task(f"{HERE}.report")


class PollsOutContinuing(Workflow):
    name = "poll_exhausted_continue"
    wait = Task(
        f"{HERE}.check",
        repeat_until=never,
        every=EVERY,
        max_iterations=2,
        on_exhausted="continue",
    )
    report = Task(f"{HERE}.report")


class PollsBroken(Workflow):
    name = "poll_condition_error"
    wait = Task(f"{HERE}.check", repeat_until=broken, every=EVERY, max_iterations=5)
    report = Task(f"{HERE}.report")


def sleeping_poll(run: Run) -> Timer:
    """The ``repeat`` timer the poll of ``run`` sleeps on; its step waits on it."""
    step = Step.objects.get(run=run, name="wait")
    assert step.status == "waiting"
    return Timer.objects.get(step=step, kind="repeat", status="scheduled")


def test_a_poll_sleeps_on_a_timer_between_polls_and_finishes_when_done():
    started = timezone.now()
    run = workflows.start_run(Polled)
    run_pending()
    assert len(CALLS) == 1
    timer = sleeping_poll(run)
    assert started + EVERY <= timer.due_at <= timezone.now() + EVERY

    # Not before its due time.
    run_pending(until=timer.due_at - timedelta(seconds=1))
    assert len(CALLS) == 1
    assert sleeping_poll(run) == timer

    run_pending(until=timer.due_at)
    assert len(CALLS) == 2
    second = sleeping_poll(run)
    assert second.due_at >= timer.due_at
    run_pending(until=second.due_at + timedelta(seconds=1))

    run.refresh_from_db()
    assert run.status == "completed"
    assert len(CALLS) == 3 and len(set(CALLS)) == 3
    wait = Step.objects.get(run=run, name="wait")
    assert wait.iteration == 3
    assert wait.output == {"poll": 3, "state": "done"}
    assert [row.iteration for row in StepIteration.objects.filter(step=wait)] == [1, 2]
    assert not Timer.objects.filter(run=run, status="scheduled").exists()
    assert Step.objects.get(run=run, name="report").output == {
        "last": {"poll": 3, "state": "done"},
        "polls": [1, 2, 3],
    }


def test_an_exhausted_poll_fails_the_run():
    run = run_inline(PollsOutFailing, until=timezone.now() + 3 * EVERY)
    assert run.status == "failed"
    assert run.error["code"] == "max_iterations_exceeded"
    assert run.error["step"] == "wait"
    assert run.error["iterations"] == 2
    assert len(CALLS) == 2
    assert Step.objects.get(run=run, name="report").status == "cancelled"


def test_an_exhausted_poll_that_continues_lets_the_run_go_on():
    run = run_inline(PollsOutContinuing, until=timezone.now() + 3 * EVERY)
    assert run.status == "completed"
    assert len(CALLS) == 2
    wait = Step.objects.get(run=run, name="wait")
    assert (wait.status, wait.iteration) == ("completed", 2)
    assert Step.objects.get(run=run, name="report").output["polls"] == [1, 2]


def test_a_condition_that_raises_fails_the_step_with_condition_error():
    run = run_inline(PollsBroken, until=timezone.now() + 3 * EVERY)
    assert run.status == "failed"
    wait = Step.objects.get(run=run, name="wait")
    assert wait.status == "failed"
    assert wait.error["code"] == "condition_error"
    assert "status page unreadable" in wait.error["message"]
    assert len(CALLS) == 1
    assert not Timer.objects.filter(run=run, kind="repeat").exists()


def second_poll_done(ctx) -> bool:
    return ctx.steps["wait"].output["poll"] == 2


def counted(ctx):
    CALLS.append(ctx.idempotency_key)
    return {"poll": ctx.iteration}


def two_rounds(ctx) -> bool:
    return ctx.iteration < 2


class PolledInALoop(Workflow):
    name = "poll_in_a_loop"
    order = Task(NOOP)
    wait = Task(f"{HERE}.counted", repeat_until=second_poll_done, every=EVERY, max_iterations=2)
    again = Loop(back_to="order", while_=two_rounds, max_iterations=2)
    report = Task(f"{HERE}.report")


def test_a_poll_inside_a_loop_counts_its_polls_afresh_in_each_round():
    """The poll is a loop of its own: its bound holds for each round of the loop around
    it, as a nested loop node's does."""
    run = workflows.start_run(PolledInALoop)
    for _ in range(4):
        run_pending(until=timezone.now() + 10 * EVERY)
    run.refresh_from_db()
    assert run.status == "completed", run.error
    assert len(CALLS) == 4 and len(set(CALLS)) == 4
    wait = Step.objects.get(run=run, name="wait")
    assert (wait.iteration, wait.output) == (2, {"poll": 2})
    assert Step.objects.get(run=run, name="report").output["polls"] == [1, 2, 1, 2]


def busy_at_first(ctx):
    """Fails the first attempt of each poll; the retry answers."""
    CALLS.append(ctx.idempotency_key)
    if len(CALLS) % 2:
        raise RuntimeError("status page busy")
    return {"poll": ctx.iteration}


class PollsFlaky(Workflow):
    name = "poll_flaky"
    wait = Task(
        f"{HERE}.busy_at_first",
        repeat_until=second_poll_done,
        every=EVERY,
        max_iterations=3,
        retry=Retry(max_attempts=2),
    )


def test_a_retried_poll_keeps_its_key_and_the_next_poll_has_a_new_one():
    run = workflows.start_run(PollsFlaky)
    for _ in range(3):
        run_pending(until=timezone.now() + 10 * EVERY)
    run.refresh_from_db()
    assert run.status == "completed"
    first, retried, second, retried_second = CALLS
    assert first == retried != second == retried_second
    assert Step.objects.get(run=run, name="wait").output == {"poll": 2}


def test_a_run_cancelled_while_its_poll_sleeps_polls_no_more():
    run = workflows.start_run(PollsOutFailing)
    run_pending()
    timer = sleeping_poll(run)
    workflows.cancel_run(run, reason="not needed")
    run_pending(until=timer.due_at + EVERY)
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert len(CALLS) == 1
    timer.refresh_from_db()
    assert timer.status == "cancelled"


def test_a_poll_that_ran_out_gets_a_fresh_count_when_retried():
    """As a rerun does (tests/engine/loops/test_loop_rerun.py)."""
    run = run_inline(PollsOutFailing, until=timezone.now() + 3 * EVERY)
    assert run.error["code"] == "max_iterations_exceeded"
    workflows.retry_run(run)
    run_pending(until=timezone.now() + 3 * EVERY)
    run_pending(until=timezone.now() + 6 * EVERY)
    assert len(CALLS) == 4
