"""Retrying a run whose loop ran out of iterations: the loop gets a fresh count of
rounds, as a retried task gets a fresh set of attempts."""

from __future__ import annotations

import pytest

import workflows
from tests.support.handlers import NOOP
from tests.support.runs import run_inline
from workflows import Loop, Task, Workflow
from workflows.models import Step, StepIteration
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

ROUNDS_WANTED = {"count": 3}


def enough(ctx) -> bool:
    """Go round until the body's step has run ``ROUNDS_WANTED`` times in all."""
    return len(ctx.steps["work"].iterations) < ROUNDS_WANTED["count"]


class Bounded(Workflow):
    name = "loop_retry_bounded"
    work = Task(NOOP)
    again = Loop(back_to="work", while_=enough, max_iterations=2)
    after_loop = Task(NOOP)


def test_a_retried_exhausted_loop_goes_round_again_and_finishes():
    run = run_inline(Bounded)
    assert run.status == "failed"
    assert run.error["code"] == "max_iterations_exceeded"
    loop = Step.objects.get(run=run, name="again")
    assert (loop.status, loop.iteration) == ("failed", 2)

    workflows.retry_run(run.pk)
    run_pending()

    run.refresh_from_db()
    assert run.status == "completed", run.error
    steps = {step.name: step for step in Step.objects.filter(run=run)}
    assert steps["again"].output == {"iterations": 2, "exhausted": False}
    assert steps["work"].iteration == 3
    assert StepIteration.objects.filter(step=steps["work"]).count() == 2
    assert steps["after_loop"].status == "completed"
