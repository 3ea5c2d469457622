"""A new round starts clean: ``rerun_from``, ``retry_run`` and a loop's next iteration
start the steps they reset with no progress, an empty summary and no frames; the ended
round stays readable as a ``StepRound`` (its telemetry, attempts and frames), and the
attempts of the round are numbered from 1 on every surface."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

import workflows
from tests.support.runs import run_inline
from workflows import Loop, Retry, Task, Workflow
from workflows.models import Run, Step, StepRound
from workflows.queries.frames import frames
from workflows.status import attempt_in_round
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.telemetry.test_rounds"
# Which attempt (as ctx.attempt counts) of ``flaky`` fails, per test.
FAILING = {"through": 0}
WANTED = {"rounds": 1}


@pytest.fixture(autouse=True)
def _reset() -> None:
    FAILING["through"] = 0
    WANTED["rounds"] = 1


def reports(ctx: Any) -> dict[str, int]:
    ctx.progress(10, 10, f"round {ctx.iteration} done")
    ctx.summary({f"at{ctx.attempt}": True})
    ctx.log(f"attempt {ctx.attempt}")
    return {"attempt": ctx.attempt}


def flaky(ctx: Any) -> dict[str, int]:
    ctx.progress(1, 2, "half")
    ctx.summary({f"at{ctx.attempt}": True})
    ctx.log(f"attempt {ctx.attempt}")
    if ctx.attempt <= FAILING["through"]:
        raise RuntimeError(f"attempt {ctx.attempt} fails")
    return {"attempt": ctx.attempt}


def more(ctx: Any) -> bool:
    return ctx.iteration < WANTED["rounds"]


QUICK = Retry(max_attempts=3, initial_interval=timedelta(milliseconds=1))


class Plain(Workflow):
    name = "rounds_plain"
    first = Task(f"{HERE}.reports")
    second = Task(f"{HERE}.reports")


class Flaky(Workflow):
    name = "rounds_flaky"
    work = Task(f"{HERE}.flaky", retry=QUICK)


class Looping(Workflow):
    name = "rounds_looping"
    work = Task(f"{HERE}.flaky", retry=QUICK)
    again = Loop(back_to="work", while_=more, max_iterations=5)


def step(run: Run, name: str) -> Step:
    return Step.objects.get(run=run, name=name)


def run_until_quiet() -> None:
    run_pending(until=timezone.now() + timedelta(days=1))


def finished(workflow: type[Workflow]) -> Run:
    return run_inline(workflow, until=timezone.now() + timedelta(days=1))


def test_rerun_from_starts_the_reset_steps_clean_and_keeps_the_old_round():
    run = finished(Plain)
    before = step(run, "second")
    assert before.summary == {"at1": True} and before.progress_done == 10

    workflows.rerun_from(run.pk, "second")
    reset = step(run, "second")
    assert reset.status in ("pending", "ready")
    assert reset.summary == {} and reset.summary_version == 0
    assert reset.progress_done is None and reset.progress_message == ""
    assert frames(reset) == [] and frames(reset.pk) == []
    assert reset.round == 2
    assert step(run, "first").round == 1  # upstream: not reset

    ended = StepRound.objects.get(step=reset)
    assert (ended.round, ended.status, ended.attempt, ended.attempts_before) == (
        1,
        "completed",
        1,
        0,
    )
    assert ended.summary == {"at1": True} and ended.progress_message == "round 1 done"
    assert [f.text for f in frames(reset, round=1)] == ["attempt 1"]

    run_until_quiet()
    again = step(run, "second")
    # the new round's own summary: no merge with the old one
    assert again.summary == {"at2": True}
    assert [f.text for f in frames(again)] == ["attempt 2"]
    assert [f.text for f in frames(again, round=1)] == ["attempt 1"]
    assert again.attempts_in_round == (1, 3)


def test_retry_run_starts_the_failed_step_clean_with_attempts_from_one():
    FAILING["through"] = 3
    run = finished(Flaky)
    assert run.status == "failed"
    failed = step(run, "work")
    assert failed.attempts_in_round == (3, 3)
    assert failed.summary == {"at1": True, "at2": True, "at3": True}

    FAILING["through"] = 3  # attempt 4 (the new round's first) succeeds
    workflows.retry_run(run.pk)
    reset = step(run, "work")
    assert reset.summary == {} and reset.progress_done is None and frames(reset) == []
    assert reset.attempts_in_round == (0, 3)

    run_until_quiet()
    done = step(run, "work")
    assert done.status == "completed"
    assert done.attempt == 4  # the fencing counter goes on
    assert done.attempts_in_round == (1, 3)
    assert done.summary == {"at4": True}
    ended = StepRound.objects.get(step=done)
    assert ended.summary == {"at1": True, "at2": True, "at3": True}
    assert attempt_in_round(ended.attempt, ended.max_attempts, ended.attempts_before) == (3, 3)
    assert [f.text for f in frames(done, round=1)] == [f"attempt {n}" for n in (1, 2, 3)]


def test_a_loops_next_round_starts_clean_and_numbers_attempts_from_one():
    WANTED["rounds"] = 2
    FAILING["through"] = 1  # the first round needs two attempts, the second one
    run = finished(Looping)
    assert run.status == "completed"
    work = step(run, "work")
    assert (work.iteration, work.round) == (2, 2)
    assert work.summary == {"at3": True}
    assert work.attempts_in_round == (1, 3)
    first = StepRound.objects.get(step=work)
    assert (first.iteration, first.attempt, first.attempts_before) == (1, 2, 0)
    assert first.summary == {"at1": True, "at2": True}
    assert [f.text for f in frames(work)] == ["attempt 3"]
    assert [f.text for f in frames(work, round=1)] == ["attempt 1", "attempt 2"]


def test_every_surface_numbers_attempts_within_the_round():
    WANTED["rounds"] = 2
    FAILING["through"] = 1
    run = finished(Looping)
    shown = workflows.get_run(run.pk)
    explained = workflows.explain(run.pk)
    by_name = {s["name"]: s for s in explained.steps}
    assert (by_name["work"]["attempt"], by_name["work"]["max_attempts"]) == (1, 3)
    assert by_name["work"]["round"] == 2
    out = StringIO()
    call_command("workflows_show", str(run.pk), stdout=out)
    line = next(row for row in out.getvalue().splitlines() if row.split()[1:3] == ["work", "task"])
    assert "1/3" in line and "3/5" not in line
    assert shown is not None


def test_frames_of_an_unknown_round_are_refused():
    run = finished(Plain)
    with pytest.raises(workflows.InvalidInput) as refused:
        frames(step(run, "first"), round=7)
    assert refused.value.code == "invalid_input"
