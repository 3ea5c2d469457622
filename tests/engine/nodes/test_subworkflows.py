"""Child runs: SubWorkflow steps and fan-out items that start child workflows."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

import workflows
from tests.support.runs import run_inline
from workflows import FanOut, Gate, SubWorkflow, Task, Workflow
from workflows.models import FanOutItem, Run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.nodes.test_subworkflows"


def label(ctx):
    return f"label-{ctx.input['sku']}"


def explode(ctx):
    raise workflows.PermanentError(f"no stock for {ctx.input['sku']}")


class Child(Workflow):
    name = "sub_child"
    make_label = Task(f"{HERE}.label")

    @classmethod
    def clean_input(cls, data):
        if "sku" not in data:
            raise workflows.InvalidInput("sub_child needs a 'sku'")
        return data


class FailingChild(Workflow):
    name = "sub_failing_child"
    boom = Task(f"{HERE}.explode")


class WaitingChild(Workflow):
    name = "sub_waiting_child"
    approval = Gate(prompt="child ok?")


class Parent(Workflow):
    name = "sub_parent"
    child = SubWorkflow("sub_child", input=lambda ctx: {"sku": ctx.input["sku"]})
    after = Task(f"{HERE}.label", when=lambda ctx: False)


class FailingParent(Workflow):
    name = "sub_failing_parent"
    child = SubWorkflow("sub_failing_child")


class WaitingParent(Workflow):
    name = "sub_waiting_parent"
    child = SubWorkflow("sub_waiting_child")


class PerItem(Workflow):
    name = "sub_per_item"
    labels = FanOut(
        workflow="sub_child",
        items=lambda ctx: [{"sku": s} for s in ctx.input["skus"]],
        max_parallel=2,
    )


def test_subworkflow_step_completes_with_the_child_output():
    run = workflows.start_run(Parent, {"sku": "X1"})
    child = Run.objects.get(parent_run=run)
    assert child.parent_step.name == "child"
    assert run.steps.get(name="child").status == "waiting"
    run_pending()
    run.refresh_from_db()
    child.refresh_from_db()
    assert child.status == "completed"
    assert run.steps.get(name="child").output == {"make_label": "label-X1"}
    assert run.status == "completed"


def test_failing_child_fails_the_parent_step():
    run = run_inline(FailingParent, {"sku": "Z"})
    assert run.status == "failed"
    assert run.error["cause"] == "child_failed"
    assert "no stock for Z" in run.error["message"]


def test_cancelling_the_parent_cancels_its_children():
    run = workflows.start_run(WaitingParent)
    child = Run.objects.get(parent_run=run)
    assert child.status == "waiting"
    workflows.cancel_run(run, reason="customer left")
    run.refresh_from_db()
    child.refresh_from_db()
    assert child.status == "cancelled"
    assert run.status == "cancelled"


def test_fanout_items_can_start_child_runs():
    run = workflows.start_run(PerItem, {"skus": ["a", "b", "c"]})
    assert Run.objects.filter(parent_run=run).count() == 2  # max_parallel
    run_pending()
    run.refresh_from_db()
    step = run.steps.get()
    assert run.status == "completed"
    assert step.output == [{"make_label": f"label-{s}"} for s in "abc"]
    assert set(FanOutItem.objects.filter(step=step).values_list("status", flat=True)) == {
        "completed"
    }


def test_child_gate_decided_resumes_the_parent():
    run = workflows.start_run(WaitingParent)
    child = Run.objects.get(parent_run=run)
    user = User.objects.create_user("boss")
    workflows.approve_gate(child.steps.get(), user=user)
    run.refresh_from_db()
    assert run.status == "completed"


class UnknownChild(Workflow, register=False):
    name = "sub_unknown_child"
    child = SubWorkflow("sub_no_such_workflow")


class BadChildInput(Workflow):
    name = "sub_bad_child_input"
    child = SubWorkflow("sub_child", input=lambda ctx: {"not_sku": 1})


def test_unknown_child_workflow_fails_the_step_clearly():
    workflows.definitions.registry.register(UnknownChild)
    try:
        run = workflows.start_run(UnknownChild)
        run.refresh_from_db()
        assert run.status == "failed"
        assert run.error["cause"] == "child_error"
        assert "no workflow named 'sub_no_such_workflow'" in run.error["message"]
    finally:
        workflows.definitions.registry.unregister("sub_unknown_child", 1)


def test_child_input_is_validated_by_the_child_definition():
    run = workflows.start_run(BadChildInput)
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error["cause"] == "child_error"
    assert "sub_child needs a 'sku'" in run.error["message"]
    assert not Run.objects.filter(parent_run=run).exists()
