"""Gates: waiting for people, permissions, selections, timeouts, routing on rejection."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.exceptions import PermissionDenied
from django.utils import timezone

import workflows
from tests.support.runs import run_inline
from workflows import (
    Gate,
    GateAlreadyDecided,
    InvalidDecision,
    Option,
    Task,
    Workflow,
)
from workflows.models import Timer
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.nodes.test_gates"


def prepare(ctx):
    return {"parcels": 2}


def ship(ctx):
    return {"shipped_with": ctx.steps["approval"].output["selections"]}


SHIPPING = [Option("std", "Standard"), Option("express", "Express"), Option("drone", "Drone")]


class Shipping(Workflow):
    name = "gate_shipping"
    prepare = Task(f"{HERE}.prepare")
    approval = Gate(
        prompt="Ship order {input[order]} with {steps[prepare][parcels]} parcels?",
        options=SHIPPING,
        min_selections=1,
        max_selections=1,
        timeout=timedelta(days=2),
        permission="auth.change_user",
        assignees=["assignee", "group:shippers"],
    )
    ship = Task(f"{HERE}.ship")


class Routed(Workflow):
    name = "gate_routed"
    review = Gate(prompt="Publish?", on_reject="continue")
    publish = Task(
        f"{HERE}.prepare", when=lambda ctx: ctx.steps["review"].output["decision"] == "approved"
    )


class AutoApprove(Workflow):
    name = "gate_auto"
    review = Gate(prompt="ok?", timeout=timedelta(hours=1), on_timeout="approve")
    after = Task(f"{HERE}.prepare")


class FailOnTimeout(Workflow):
    name = "gate_fail_on_timeout"
    review = Gate(prompt="ok?", timeout=timedelta(hours=1), on_timeout="fail")


@pytest.fixture
def approver():
    user = User.objects.create_user("approver")
    user.user_permissions.add(Permission.objects.get(codename="change_user"))
    return User.objects.get(pk=user.pk)  # fresh permission cache


def waiting_gate(workflow=Shipping, data=None):
    run = workflows.start_run(workflow, data if data is not None else {"order": "A-7"})
    run_pending()
    gate = run.steps.get(kind="gate")
    assert gate.status == "waiting"
    return run, gate


def test_entering_a_gate_renders_the_prompt_and_arms_the_timeout():
    run, gate = waiting_gate()
    run.refresh_from_db()
    assert run.status == "waiting"
    assert gate.prompt == "Ship order A-7 with 2 parcels?"
    assert gate.options[1] == {"value": "express", "label": "Express"}
    assert gate.assignees == {"users": ["assignee"], "groups": ["shippers"]}
    timer = Timer.objects.get(step=gate)
    assert timer.kind == "gate_timeout"
    assert abs(timer.due_at - (timezone.now() + timedelta(days=2))) < timedelta(minutes=1)


def test_approval_stores_the_decision_as_output_and_advances(approver):
    run, gate = waiting_gate()
    gate = workflows.approve_gate(gate, user=approver, selections=["express"], feedback="rush")
    assert gate.status == "completed"
    assert gate.decision == "approved"
    assert gate.decided_by == approver
    assert gate.selections == ["express"]
    assert gate.output["by"] == "approver"
    assert gate.output["feedback"] == "rush"
    assert Timer.objects.get(step=gate).status == "cancelled"
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.output == {"ship": {"shipped_with": ["express"]}}


def test_a_decision_records_who_when_and_from_where(approver):
    run, gate = waiting_gate()
    gate = workflows.approve_gate(
        gate, user=approver, selections=["std"], address="2001:0db8:0000::0001"
    )
    assert gate.decided_from == "2001:db8::1"
    event = run.events.get(type="gate.decided")
    assert event.payload == {
        "decision": "approved",
        "by": "approver",
        "at": gate.decided_at.isoformat(),
        "address": "2001:db8::1",
    }


def test_a_timeout_records_when_and_no_one(approver):
    run, _gate = waiting_gate(AutoApprove, {})
    run_pending(until=timezone.now() + timedelta(hours=2))
    review = run.steps.get(name="review")
    payload = run.events.get(type="gate.decided").payload
    assert (payload["by"], payload["address"], payload["reason"]) == (None, None, "timeout")
    assert payload["at"] == review.decided_at.isoformat()
    assert review.decided_from is None


def test_superusers_may_decide_any_gate():
    _run, gate = waiting_gate()
    root = User.objects.create_superuser("root")
    assert workflows.approve_gate(gate, user=root, selections=["std"]).decided_by == root


@pytest.mark.parametrize(
    ("selections", "message"),
    [
        (["teleport"], "has no option 'teleport'; allowed: \\['std', 'express', 'drone'\\]"),
        ([], "needs exactly 1 selection, got 0"),
        (["std", "express"], "needs exactly 1 selection, got 2"),
        (["std", "std"], "selected twice"),
    ],
)
def test_bad_selections_are_refused_and_nothing_changes(approver, selections, message):
    run, gate = waiting_gate()
    with pytest.raises(InvalidDecision, match=message):
        workflows.approve_gate(gate, user=approver, selections=selections)
    gate.refresh_from_db()
    assert gate.status == "waiting"
    assert not run.events.filter(type="gate.decided").exists()


def test_deciders_need_the_permission_or_to_be_assignees():
    _run, gate = waiting_gate()
    stranger = User.objects.create_user("stranger")
    with pytest.raises(PermissionDenied, match="may not decide gate 'approval'"):
        workflows.approve_gate(gate, user=stranger, selections=["std"])
    with pytest.raises(PermissionDenied, match="signed-in, active user"):
        workflows.reject_gate(gate, user=None)
    assignee = User.objects.create_user("assignee")
    workflows.approve_gate(gate, user=assignee, selections=["std"])


def test_group_assignees_may_decide():
    run, gate = waiting_gate()
    member = User.objects.create_user("member")
    member.groups.add(Group.objects.create(name="shippers"))
    workflows.reject_gate(gate, user=member, feedback="address unknown")
    gate.refresh_from_db()
    run.refresh_from_db()
    assert gate.status == "failed"
    assert gate.decision == "rejected"
    assert run.status == "failed"
    assert run.error["cause"] == "gate_rejected"
    assert "rejected by member: address unknown" in run.error["message"]


def test_deciding_twice_is_a_conflict(approver):
    run, gate = waiting_gate()
    workflows.approve_gate(gate, user=approver, selections=["std"])
    with pytest.raises(GateAlreadyDecided, match="is completed \\(approved\\)"):
        workflows.approve_gate(gate, user=approver, selections=["std"])
    with pytest.raises(workflows.StaleState):
        workflows.reject_gate(gate, user=approver)
    assert run.events.filter(type="gate.decided").count() == 1


def test_a_stale_read_of_the_gate_loses_to_the_first_decision(approver):
    _run, gate = waiting_gate()
    stale = workflows.models.Step.objects.get(pk=gate.pk)
    workflows.approve_gate(gate, user=approver, selections=["std"])
    from workflows.engine.nodes.gate import decide_gate

    with pytest.raises(GateAlreadyDecided):
        decide_gate(stale.pk, version=stale.version, decision="rejected", user=approver)


def test_rejection_can_route_instead_of_failing():
    user = User.objects.create_user("editor")
    run, gate = waiting_gate(Routed, {})
    workflows.reject_gate(gate, user=user, feedback="not yet")
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.steps.get(name="review").output["decision"] == "rejected"
    assert run.steps.get(name="publish").status == "skipped"


def test_timeout_approves_when_so_declared():
    run, _gate = waiting_gate(AutoApprove, {})
    run_pending(until=timezone.now() + timedelta(minutes=59))
    assert run.steps.get(name="review").status == "waiting"
    run_pending(until=timezone.now() + timedelta(hours=2))
    run.refresh_from_db()
    review = run.steps.get(name="review")
    assert review.decision == "approved"
    assert review.output["feedback"] == "timed out"
    assert run.status == "completed"


def test_timeout_rejects_by_default_and_can_fail():
    run, _gate = waiting_gate(FailOnTimeout, {})
    run_pending(until=timezone.now() + timedelta(hours=2))
    run.refresh_from_db()
    assert run.steps.get(name="review").status == "timed_out"
    assert run.status == "failed"
    assert run.error["cause"] == "gate_timed_out"


def test_a_prompt_naming_missing_input_fails_the_run_clearly():
    run = run_inline(Shipping, {"wrong": 1})
    assert run.status == "failed"
    assert run.error["cause"] == "prompt_error"
    assert "order" in run.error["message"]


def test_approving_a_task_is_refused(approver):
    run, _ = waiting_gate()
    task = run.steps.get(name="prepare")
    with pytest.raises(workflows.InvalidTransition, match="is a task, not a gate"):
        workflows.approve_gate(task, user=approver)


def test_inactive_assignees_may_not_decide():
    _run, gate = waiting_gate()
    assignee = User.objects.create_user("assignee", is_active=False)
    with pytest.raises(PermissionDenied, match="active user"):
        workflows.approve_gate(gate, user=assignee, selections=["std"])


def test_unknown_steps_and_runs_are_clear_errors(approver):
    with pytest.raises(workflows.StepNotFound):
        workflows.approve_gate(999_999, user=approver)
    with pytest.raises(workflows.RunNotFound):
        workflows.send_signal("not-a-uuid", "paid")
