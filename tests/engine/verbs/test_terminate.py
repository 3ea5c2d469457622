"""Terminate: a hard stop without compensation; running attempts lose their lease."""

from __future__ import annotations

from functools import partial

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import workflows
from tests.support.handlers import BOOM, UNDO, UNDONE, WORK
from tests.support.runs import claimed
from tests.support.workflows import Work
from workflows import InvalidTransition, LeaseLost, SubWorkflow, Task, Workflow
from workflows.engine import COMPENSATION, claim, complete_work
from workflows.models import CompensationRecord, Run, Step, Timer
from workflows.testing import run_pending


class Pipeline(Workflow):
    name = "terminate_pipeline"
    extract = Task(WORK, compensate=UNDO)
    load = Task(WORK)
    report = Task(WORK)


class Doomed(Workflow):
    name = "terminate_doomed"
    first = Task(WORK, compensate=UNDO)
    second = Task(WORK, compensate=UNDO)
    third = Task(BOOM)


class Parent(Workflow):
    name = "terminate_parent"
    child = SubWorkflow(Work.name)


def refreshed(run: Run) -> Run:
    run.refresh_from_db()
    return run


@pytest.mark.django_db
def test_terminate_stops_at_once_and_fences_out_the_running_attempt():
    run = workflows.start_run(Pipeline)
    extract = claimed(run, "extract", "worker")
    complete_work(extract, "extract")
    load = claimed(run, "load", "worker")

    workflows.terminate_run(run, reason="wrong customer")
    run = refreshed(run)
    assert "cause" not in run.error  # it was running: the termination is the whole story
    assert workflows.explain(run).attention == "ok"
    assert (run.status, run.error["code"], run.error["message"]) == (
        "terminated",
        "terminated",
        "wrong customer",
    )
    steps = dict(Step.objects.filter(run=run).values_list("name", "status"))
    assert steps == {"extract": "completed", "load": "cancelled", "report": "cancelled"}
    with pytest.raises(LeaseLost, match="rejected: it is now cancelled"):
        complete_work(load, "late")
    assert CompensationRecord.objects.get(run=run).status == "skipped"
    run_pending()
    assert UNDONE == []  # no compensation ran
    assert not Timer.objects.filter(run=run, status="scheduled").exists()
    assert run.events.filter(type="lease.lost").count() == 1


@pytest.mark.django_db
def test_terminate_skips_the_rest_of_an_unwinding_run():
    run = workflows.start_run(Doomed)
    run_pending(max_rounds=1)  # first, second and third ran; compensation is ready
    run = refreshed(run)
    assert run.status == "compensating"
    ready = CompensationRecord.objects.get(run=run, status="ready")
    lease = claim(COMPENSATION, ready.pk, "worker")
    workflows.terminate_run(run)
    run = refreshed(run)
    assert run.status == "terminated"
    assert (run.error["code"], run.error["cause"]["code"]) == ("terminated", "step_failed")
    assert workflows.explain(run).attention == "failed"  # it was failing: still a failure
    assert set(CompensationRecord.objects.values_list("status", flat=True)) == {"skipped"}
    with pytest.raises(LeaseLost):
        complete_work(lease, None)


@pytest.mark.django_db
def test_terminate_reaches_child_runs():
    run = workflows.start_run(Parent)
    child = Run.objects.get(parent_run=run)
    workflows.terminate_run(run)
    assert refreshed(child).status == "terminated"
    assert refreshed(run).status == "terminated"


@pytest.mark.django_db
def test_terminate_refuses_a_finished_run_saying_why():
    run = workflows.start_run(Pipeline)
    run_pending()
    with pytest.raises(InvalidTransition, match="run is completed; terminate needs "):
        workflows.terminate_run(run)


@pytest.mark.django_db
def test_the_command_terminates_and_refuses_in_one_line(capsys):
    run = workflows.start_run(Pipeline)
    call_command("workflows_terminate", str(run.pk), "--reason", "operator")
    assert "terminated" in capsys.readouterr().out
    with pytest.raises(CommandError, match="run is terminated; terminate needs"):
        call_command("workflows_terminate", str(run.pk))


@pytest.mark.django_db(transaction=True)
def test_terminate_racing_a_completing_attempt_keeps_one_story(concurrently):
    for round_number in range(5):
        run = workflows.start_run(Pipeline, {"round": round_number})
        lease = claimed(run, "extract", "worker")
        completed, terminated = concurrently(
            partial(complete_work, lease, "extract", claim_next=True),
            partial(workflows.terminate_run, run),
        )
        assert not isinstance(terminated, Exception), terminated
        assert refreshed(run).status == "terminated"
        extract = Step.objects.get(run=run, name="extract")
        if isinstance(completed, LeaseLost):  # the terminate won: the result is rejected
            assert extract.status == "cancelled"
            assert not CompensationRecord.objects.filter(run=run).exists()
        else:  # the completion won; its chained claim of the next step was fenced out
            assert not isinstance(completed, Exception), completed
            assert extract.status == "completed"
            assert CompensationRecord.objects.get(run=run).status == "skipped"
        assert not Step.objects.filter(run=run, status="running").exists()
