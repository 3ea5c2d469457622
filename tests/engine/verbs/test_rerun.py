"""Rerun from a step: the step and its downstream run again, with new idempotency keys."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

import workflows
from tests.support.handlers import BROKEN
from workflows import FanOut, InvalidTransition, StepNotFound, Task, Workflow
from workflows.models import FanOutItem, Run, Step
from workflows.testing import run_pending

HERE = "tests.engine.verbs.test_rerun"
KEYS: list[tuple[str, str]] = []


def work(ctx: Any) -> str:
    KEYS.append((ctx.step_name, ctx.idempotency_key))
    if ctx.step_name in BROKEN:
        raise workflows.PermanentError(f"{ctx.step_name} is broken")
    return f"{ctx.step_name} done"


def undo(ctx: Any) -> None:
    return None


class Pipeline(Workflow):
    name = "rerun_pipeline"
    extract = Task(f"{HERE}.work")
    transform = Task(f"{HERE}.work")
    load = Task(f"{HERE}.work")


class Branches(Workflow):
    """``left`` fails while ``right`` waits behind ``slow``: the failure cancels ``right``."""

    name = "rerun_branches"
    start = Task(f"{HERE}.work")
    left = Task(f"{HERE}.work", after=["start"])
    slow = Task(f"{HERE}.work", after=["start"])
    right = Task(f"{HERE}.work", after=["slow"])


class Reserving(Workflow):
    name = "rerun_reserving"
    reserve = Task(f"{HERE}.work", compensate=f"{HERE}.undo")
    notify = Task(f"{HERE}.work")


class Spread(Workflow):
    name = "rerun_spread"
    each = FanOut(f"{HERE}.work", items=lambda ctx: ["a", "b"], key=str)


@pytest.fixture(autouse=True)
def _reset():
    KEYS.clear()


def refreshed(run: Run) -> Run:
    run.refresh_from_db()
    return run


@pytest.mark.django_db
def test_rerun_from_the_failed_step_keeps_upstream_outputs_and_gets_new_keys():
    operator = User.objects.create_user("operator")
    BROKEN.add("transform")
    run = workflows.start_run(Pipeline)
    run_pending()
    assert refreshed(run).status == "failed"
    BROKEN.clear()
    KEYS.clear()

    workflows.rerun_from(run, "transform", reason="fixed the mapping", user=operator)
    run_pending()
    run = refreshed(run)
    assert run.status == "completed"
    assert [name for name, _ in KEYS] == ["transform", "load"]  # extract did not run again
    assert dict(KEYS) == {"transform": f"{run.pk}/transform#1", "load": f"{run.pk}/load#1"}
    assert Step.objects.get(run=run, name="extract").generation == 0
    requested = run.events.get(type="run.rerun_requested")
    assert requested.payload["by"] == "operator"
    assert requested.payload["from_step"] == "transform"
    assert requested.payload["reset"] == ["transform", "load"]


@pytest.mark.django_db
def test_rerun_of_a_completed_run_runs_the_step_and_its_downstream_again():
    run = workflows.start_run(Pipeline)
    run_pending()
    KEYS.clear()
    workflows.rerun_from(run, "load")
    run_pending()
    assert refreshed(run).status == "completed"
    assert [name for name, _ in KEYS] == ["load"]
    load = Step.objects.get(run=run, name="load")
    assert (load.generation, load.attempt) == (1, 2)


@pytest.mark.django_db
def test_rerun_reopens_branches_the_failure_cancelled():
    BROKEN.add("left")
    run = workflows.start_run(Branches)
    run_pending()
    assert Step.objects.get(run=run, name="right").status in {"cancelled", "completed"}
    BROKEN.clear()
    workflows.rerun_from(run, "left")
    run_pending()
    assert refreshed(run).status == "completed"
    assert set(Step.objects.filter(run=run).values_list("status", flat=True)) == {"completed"}


@pytest.mark.django_db
def test_a_rerun_fanout_computes_its_items_again_with_new_keys():
    run = workflows.start_run(Spread)
    run_pending()
    first_keys = sorted(key for _, key in KEYS)
    assert first_keys == [f"{run.pk}/each/a", f"{run.pk}/each/b"]
    KEYS.clear()
    workflows.rerun_from(run, "each")
    run_pending()
    assert refreshed(run).status == "completed"
    assert sorted(key for _, key in KEYS) == [f"{run.pk}/each#1/a", f"{run.pk}/each#1/b"]
    assert FanOutItem.objects.filter(step__run=run).count() == 2


@pytest.mark.django_db
def test_rerun_refusals_say_why():
    running = workflows.start_run(Pipeline)
    with pytest.raises(InvalidTransition, match="run is running; rerun needs "):
        workflows.rerun_from(running, "extract")

    BROKEN.add("extract")
    failed = workflows.start_run(Pipeline, {"n": 2})
    run_pending()
    with pytest.raises(InvalidTransition, match=r"upstream steps completed .*'transform' is"):
        workflows.rerun_from(failed, "load")  # its upstream never ran
    with pytest.raises(StepNotFound, match="has no step 'nope'"):
        workflows.rerun_from(failed, "nope")

    BROKEN.clear()
    reserved = workflows.start_run(Reserving)
    run_pending()
    with pytest.raises(InvalidTransition, match="'reserve' completed work whose compensation"):
        workflows.rerun_from(reserved, "reserve")
    workflows.rerun_from(reserved, "notify")  # nothing to undo downstream of notify


@pytest.mark.django_db
def test_the_command_reruns_by_step_name_and_refuses_in_one_line(capsys):
    run = workflows.start_run(Pipeline, business_key="batch-9")
    run_pending()
    call_command("workflows_rerun", "--business-key", "batch-9", "--from", "load")
    assert "running" in capsys.readouterr().out
    with pytest.raises(CommandError, match="run is running; rerun needs"):
        call_command("workflows_rerun", str(run.pk)[:6], "--from", "load")


@pytest.mark.django_db(transaction=True)
def test_two_operators_rerunning_at_once_one_wins(concurrently):
    run = workflows.start_run(Pipeline)
    run_pending()
    results = concurrently(
        partial(workflows.rerun_from, run, "transform"),
        partial(workflows.rerun_from, run, "transform"),
    )
    refused = [result for result in results if isinstance(result, InvalidTransition)]
    assert len(refused) == 1, results
    assert "run is running; rerun needs" in str(refused[0])
    assert Step.objects.get(run=run, name="transform").generation == 1
    assert refreshed(run).events.filter(type="run.rerun_requested").count() == 1
