"""Operator verbs: retry and skip steps, retry runs; each names the states it accepts."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

import workflows
from tests.support.handlers import BROKEN, WORK
from tests.support.runs import run_inline
from workflows import FanOut, Gate, InvalidTransition, PermanentError, Retry, Task, Workflow
from workflows.models import FanOutItem
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.verbs.test_operator_verbs"


def item_work(ctx):
    if ctx.item in BROKEN:
        raise PermanentError(f"item {ctx.item} is broken")
    return ctx.item


@pytest.fixture
def operator():
    return User.objects.create_user("operator")


ONCE = Retry(max_attempts=1)


class Pipeline(Workflow):
    name = "verbs_pipeline"
    extract = Task(WORK, retry=ONCE)
    transform = Task(WORK, retry=ONCE)
    load = Task(WORK, retry=ONCE)


class Fan(Workflow):
    name = "verbs_fan"
    items = FanOut(f"{HERE}.item_work", items=lambda ctx: ["a", "b", "c"], retry=ONCE)


class Approval(Workflow):
    name = "verbs_approval"
    approve = Gate(prompt="ok?")
    then = Task(WORK)


def failed_pipeline():
    BROKEN.add("transform")
    run = run_inline(Pipeline)
    assert run.status == "failed"
    assert run.steps.get(name="load").status == "cancelled"
    return run


def test_retry_step_resumes_the_failed_run(operator):
    run = failed_pipeline()
    BROKEN.clear()
    step = workflows.retry_step(run.steps.get(name="transform"), user=operator)
    assert step.status == "ready"
    assert step.max_attempts == 2  # fresh attempts on top of the one used
    run.refresh_from_db()
    assert run.status == "running"
    assert run.error is None
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.output == {"load": "load"}
    assert run.events.filter(type="step.retried", payload__by="operator").count() == 1


def test_retry_step_refuses_steps_that_did_not_fail(operator):
    run = failed_pipeline()
    with pytest.raises(
        InvalidTransition,
        match="step 'extract': step is completed; retry_step needs failed, timed_out",
    ):
        workflows.retry_step(run.steps.get(name="extract"), user=operator)


def test_skip_a_failed_step_with_an_output(operator):
    run = failed_pipeline()
    step = workflows.skip_step(run.steps.get(name="transform"), user=operator, output="by hand")
    assert (step.status, step.output) == ("completed", "by hand")
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.events.filter(type="step.skipped", payload__by="operator").exists()


def test_skip_a_waiting_gate(operator):
    run = workflows.start_run(Approval)
    workflows.skip_step(
        run.steps.get(name="approve"), user=operator, output={"decision": "approved"}
    )
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"


def test_skip_refuses_completed_steps(operator):
    run = workflows.start_run(Pipeline)
    run_pending()
    with pytest.raises(InvalidTransition, match="step 'load': step is completed; skip_step needs "):
        workflows.skip_step(run.steps.get(name="load"), user=operator)


def test_retry_run_retries_failed_fanout_items_only(operator):
    BROKEN.add("b")
    run = run_inline(Fan)
    assert run.status == "failed"
    BROKEN.clear()
    assert workflows.retry_run(run, user=operator).status == "running"
    run_pending()
    run.refresh_from_db()
    step = run.steps.get()
    assert run.status == "completed"
    assert step.output == ["a", "b", "c"]
    attempts = dict(FanOutItem.objects.filter(step=step).values_list("key", "attempt"))
    assert attempts == {"0": 1, "1": 2, "2": 1}


def test_retry_run_refuses_runs_that_did_not_fail(operator):
    run = workflows.start_run(Pipeline)
    with pytest.raises(
        InvalidTransition,
        match="run is running; retry needs cancelled, compensated, compensation_failed, "
        "failed, terminated",
    ):
        workflows.retry_run(run, user=operator)
