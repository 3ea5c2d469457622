"""Rerun from a step inside a loop's body: a new iteration of the body from that step,
the old round kept in the history, the loop node (or a poll) counting its rounds from 1
again; a step outside every loop is rerun as before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import workflows
from tests.support.runs import run_inline
from workflows import Loop, Task, Workflow
from workflows.models import Run, Step, StepIteration
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.loops.test_loop_rerun"
# Each handler call: (step, iteration, idempotency key).
CALLS: list[tuple[str, int, str]] = []
# How many rounds the loop's condition asks for.
WANTED = {"rounds": 2}


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()
    WANTED["rounds"] = 2


def work(ctx: Any) -> dict[str, int]:
    CALLS.append((ctx.step_name, ctx.iteration, ctx.idempotency_key))
    return {"round": ctx.iteration}


def more(ctx: Any) -> bool:
    return ctx.iteration < WANTED["rounds"]


class Rounds(Workflow):
    name = "loop_rerun_rounds"
    fetch = Task(f"{HERE}.work")
    check = Task(f"{HERE}.work")
    again = Loop(back_to="fetch", while_=more, max_iterations=3)
    report = Task(f"{HERE}.work")


def steps(run: Run) -> dict[str, Step]:
    return {step.name: step for step in Step.objects.filter(run=run)}


def archived(run: Run, name: str) -> list[tuple[int, str, Any]]:
    return list(
        StepIteration.objects.filter(run=run, step__name=name)
        .order_by("generation")
        .values_list("iteration", "status", "output")
    )


def test_rerun_from_a_body_step_starts_a_new_iteration_and_keeps_the_old_one():
    run = run_inline(Rounds)
    assert run.status == "completed"
    before = steps(run)
    assert before["check"].iteration == 2
    CALLS.clear()

    reset = workflows.rerun_from(run, "check")
    after = steps(run)
    assert after["check"].iteration == 3
    assert after["check"].generation == before["check"].generation + 1
    # The round the operator reran is history now, with what it did.
    assert archived(run, "check") == [
        (1, "completed", {"round": 1}),
        (2, "completed", {"round": 2}),
    ]
    # Upstream of the rerun step, the body is kept as it is.
    assert after["fetch"].iteration == 2
    assert after["fetch"].generation == before["fetch"].generation
    assert after["again"].iteration == 1
    assert after["report"].iteration == before["report"].iteration
    assert not StepIteration.objects.filter(step__name__in=["again", "report"]).exists()
    assert reset.status == "running"

    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    # check's new iteration, then a whole second round (the loop counts from 1 again).
    assert [(step, iteration) for step, iteration, _ in CALLS] == [
        ("check", 3),
        ("fetch", 3),
        ("check", 4),
        ("report", 1),
    ]
    keys = [key for _, _, key in CALLS]
    assert len(set(keys)) == len(keys)
    assert steps(run)["again"].output == {"iterations": 2, "exhausted": False}
    assert [entry[0] for entry in archived(run, "check")] == [1, 2, 3]


def test_a_run_that_ran_out_of_iterations_can_be_rerun_for_a_fresh_set_of_rounds():
    WANTED["rounds"] = 10
    run = run_inline(Rounds)
    assert run.status == "failed"
    assert run.error["code"] == "max_iterations_exceeded"
    assert steps(run)["again"].iteration == 3
    WANTED["rounds"] = 1
    CALLS.clear()

    workflows.rerun_from(run, "fetch")
    after = steps(run)
    assert (after["fetch"].iteration, after["check"].iteration) == (4, 4)
    assert after["again"].iteration == 1
    assert after["again"].status == "pending"

    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.error is None
    assert [(step, iteration) for step, iteration, _ in CALLS] == [
        ("fetch", 4),
        ("check", 4),
        ("report", 1),
    ]
    assert steps(run)["again"].output == {"iterations": 1, "exhausted": False}
    assert [entry[0] for entry in archived(run, "fetch")] == [1, 2, 3]


def test_rerun_from_a_step_after_the_loop_is_as_before():
    run = run_inline(Rounds)
    before = steps(run)
    history = StepIteration.objects.filter(run=run).count()
    CALLS.clear()

    workflows.rerun_from(run, "report")
    after = steps(run)
    assert after["report"].generation == before["report"].generation + 1
    assert after["report"].iteration == 1
    for name in ("fetch", "check", "again"):
        assert (after[name].iteration, after[name].generation) == (
            before[name].iteration,
            before[name].generation,
        )
    assert StepIteration.objects.filter(run=run).count() == history

    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert [(step, iteration) for step, iteration, _ in CALLS] == [("report", 1)]


class Nested(Workflow):
    name = "loop_rerun_nested"
    outer_start = Task(f"{HERE}.work")
    inner_work = Task(f"{HERE}.work")
    inner = Loop(back_to="inner_work", while_=more, max_iterations=3)
    outer = Loop(back_to="outer_start", while_=more, max_iterations=3, after="inner")


def test_rerun_inside_a_nested_loop_restarts_the_rounds_of_both_loops():
    WANTED["rounds"] = 1
    run = run_inline(Nested)
    assert run.status == "completed"
    CALLS.clear()

    workflows.rerun_from(run, "inner_work")
    after = steps(run)
    assert after["inner_work"].iteration == 2
    assert after["outer_start"].iteration == 1
    assert (after["inner"].iteration, after["outer"].iteration) == (1, 1)
    assert archived(run, "inner_work") == [(1, "completed", {"round": 1})]

    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert [(step, iteration) for step, iteration, _ in CALLS] == [("inner_work", 2)]


def enough_calls(ctx: Any) -> bool:
    return len(CALLS) >= WANTED["rounds"]


class Polled(Workflow):
    name = "loop_rerun_polled"
    wait = Task(f"{HERE}.work", repeat_until=enough_calls, max_iterations=2)


def test_a_poll_that_ran_out_of_iterations_can_be_rerun_for_a_fresh_set_of_polls():
    """A poll is a loop of its own: its rerun is a fresh set of polls from iteration 1,
    and the iteration that ran out stays in the history."""
    WANTED["rounds"] = 10
    run = run_inline(Polled, until=timezone.now() + timedelta(minutes=1))
    assert run.error["code"] == "max_iterations_exceeded"
    WANTED["rounds"] = 2
    CALLS.clear()

    workflows.rerun_from(run, "wait")
    run_pending(until=timezone.now() + timedelta(minutes=1))
    run.refresh_from_db()
    assert run.status == "completed", run.error
    assert [iteration for _, iteration, _ in CALLS] == [1, 2]
    assert len({key for _, _, key in CALLS}) == 2
    assert archived(run, "wait") == [
        (1, "completed", {"round": 1}),
        (2, "failed", {"round": 2}),
        (1, "completed", {"round": 1}),
    ]
