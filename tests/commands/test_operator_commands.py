"""Operator commands that act on runs: each wraps one verb, says what changed, and turns a
refusal into an error that names the problem, exits non-zero and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User

import workflows
from tests.support.commands import refused, run_command, run_json
from tests.support.handlers import BROKEN, UNDO, UNDONE, WORK
from tests.support.runs import run_inline, waiting_step
from workflows import (
    Gate,
    Option,
    Retry,
    StepNotFound,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.models import Event, Run, Signal, Step
from workflows.queries import get_step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

ONCE = Retry(max_attempts=1)


class Review(Workflow):
    name = "opcmd_review"
    prepare = Task(WORK, compensate=UNDO)
    review = Gate(
        prompt="Ship order {input[order]}?",
        options=[Option("express", "Express delivery"), Option("gift", "Gift wrap")],
        max_selections=1,
        permission="workflows.change_run",
        assignees=["group:reviewers"],
    )
    ship = Task(WORK)


class Payment(Workflow):
    name = "opcmd_payment"
    reserve = Task(WORK, compensate=UNDO)
    paid = WaitForSignal("paid")
    ship = Task(WORK)


class Pipeline(Workflow):
    name = "opcmd_pipeline"
    extract = Task(WORK, retry=ONCE)
    load = Task(WORK, retry=ONCE)


@pytest.fixture
def reviewer() -> User:
    """Decides the review gate as a member of its assignee group."""
    user = User.objects.create_user("reviewer")
    user.groups.add(Group.objects.create(name="reviewers"))
    return user


@pytest.fixture
def manager() -> User:
    """Decides the review gate through the gate's permission."""
    user = User.objects.create_user("manager")
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="workflows", codename="change_run")
    )
    return user


@pytest.fixture
def outsider() -> User:
    """Signed in, but neither holds the permission nor is an assignee."""
    return User.objects.create_user("outsider")


def waiting_gate() -> Step:
    return waiting_step(Review, {"order": "A-1"}, step="review")


def waiting_payment() -> Run:
    run = workflows.start_run(Payment, {})
    run_pending()
    assert run.steps.get(name="paid").status == "waiting"
    return run


def failed_pipeline() -> Run:
    BROKEN.add("load")
    run = run_inline(Pipeline, {})
    assert run.status == "failed"
    BROKEN.clear()
    return run


def status_of(model: type[Run] | type[Step], pk: Any) -> str:
    return model.objects.values_list("status", flat=True).get(pk=pk)


# workflows_approve


def test_approve_as_an_assignee_with_a_selection_moves_the_run_on(reviewer):
    gate = waiting_gate()
    output = run_command(
        "workflows_approve", str(gate.pk), "--user", "reviewer", "--select", "gift"
    )
    assert output == (
        f"step {gate.pk} 'review' (gate) of run {gate.run_id}: completed, "
        "approved by reviewer; selected gift\n"
    )
    gate.refresh_from_db()
    assert (gate.decision, gate.decided_by, gate.selections) == ("approved", reviewer, ["gift"])
    run_pending()
    assert status_of(Run, gate.run_id) == "completed"


def test_approve_json_returns_the_decided_step(manager):
    gate = waiting_gate()
    data = run_json("workflows_approve", str(gate.pk), "--user=manager", "--feedback", "fine")
    assert (data["id"], data["run"], data["name"]) == (gate.pk, str(gate.run_id), "review")
    assert (data["status"], data["decision"], data["decided_by"]) == (
        "completed",
        "approved",
        "manager",
    )
    assert data["output"]["selections"] == []
    assert data["output"]["feedback"] == "fine"
    assert data["error"] is None


def test_approve_refuses_deciding_twice(reviewer, manager):
    gate = waiting_gate()
    assert run_command("workflows_approve", str(gate.pk), "--user", "reviewer") == (
        f"step {gate.pk} 'review' (gate) of run {gate.run_id}: completed, approved by reviewer\n"
    )
    refused(
        "workflows_approve",
        str(gate.pk),
        "--user",
        "manager",
        message="gate 'review' is completed (approved), no longer waiting for a decision",
    )
    gate.refresh_from_db()
    assert gate.decided_by == reviewer


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--user", "reviewer", "--select", "overnight"],
            "gate 'review' has no option 'overnight'; allowed: ['express', 'gift']",
        ),
        (
            ["--user", "reviewer", "--select", "express", "gift"],
            "gate 'review' needs at most 1 selection, got 2",
        ),
        (
            ["--user", "outsider"],
            "user 'outsider' may not decide gate 'review': it needs permission "
            "workflows.change_run or one of the assignees ['group:reviewers']",
        ),
        (["--user", "ghost"], "no user named 'ghost'"),
        ([], "the following arguments are required: --user"),
    ],
)
def test_approve_refuses_bad_decisions_and_leaves_the_gate_waiting(
    args, message, reviewer, outsider
):
    gate = waiting_gate()
    refused("workflows_approve", str(gate.pk), *args, message=message)
    assert status_of(Step, gate.pk) == "waiting"


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("999999", "no step has id 999999"),
        ("review", "'review' is not a step id (step ids are integers)"),
        ("99999999999999999999999", "no step has id 99999999999999999999999"),
    ],
)
def test_approve_names_an_unknown_or_malformed_step_id(step, message, reviewer):
    refused("workflows_approve", step, "--user", "reviewer", message=message)


def test_approve_refuses_a_step_that_is_not_a_gate(reviewer):
    prepare = waiting_gate().run.steps.get(name="prepare")
    refused(
        "workflows_approve",
        str(prepare.pk),
        "--user",
        "reviewer",
        message="step 'prepare' is a task, not a gate",
    )


def test_get_step_raises_step_not_found():
    with pytest.raises(StepNotFound) as missing:
        get_step(42)
    assert missing.value.code == "step_not_found"
    assert missing.value.details == {"step": 42}


# workflows_reject


def test_reject_fails_the_gate_and_the_run_compensates(reviewer):
    gate = waiting_gate()
    output = run_command(
        "workflows_reject", str(gate.pk), "--user", "reviewer", "--feedback", "too late"
    )
    assert output == (
        f"step {gate.pk} 'review' (gate) of run {gate.run_id}: failed, rejected by reviewer\n"
    )
    run_pending()
    assert status_of(Run, gate.run_id) == "compensated"
    assert UNDONE == ["prepare"]


def test_reject_json_carries_the_rejection_as_the_step_error(manager):
    gate = waiting_gate()
    data = run_json("workflows_reject", str(gate.pk), "--user", "manager", "--feedback", "no")
    assert (data["status"], data["decision"], data["decided_by"]) == (
        "failed",
        "rejected",
        "manager",
    )
    assert data["error"] == {
        "code": "gate_rejected",
        "message": "gate 'review' was rejected by manager: no",
    }


def test_reject_refuses_deciding_twice_and_users_without_permission(reviewer, outsider):
    gate = waiting_gate()
    refused(
        "workflows_reject",
        str(gate.pk),
        "--user",
        "outsider",
        message="user 'outsider' may not decide gate 'review'",
    )
    run_command("workflows_reject", str(gate.pk), "--user", "reviewer")
    refused(
        "workflows_reject",
        str(gate.pk),
        "--user",
        "reviewer",
        message="gate 'review' is failed (rejected), no longer waiting for a decision",
    )
    refused("workflows_reject", "12x", "--user", "reviewer", message="'12x' is not a step id")
    refused("workflows_reject", str(gate.pk), "--user", "ghost", message="no user named 'ghost'")


# workflows_signal


def test_signal_is_consumed_by_the_waiting_step():
    run = waiting_payment()
    output = run_command("workflows_signal", str(run.pk), "paid", "--payload", '{"amount": 12}')
    signal = Signal.objects.get()
    assert output == f"signal 'paid' ({signal.pk}) sent to run {run.pk}: consumed by step 'paid'\n"
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.steps.get(name="paid").output == {"amount": 12}


def test_signal_sent_early_is_kept_until_the_step_waits():
    run = workflows.start_run(Payment, {})
    data = run_json("workflows_signal", str(run.pk), "paid", "--payload", '"cash"')
    assert (data["run"], data["name"], data["payload"]) == (str(run.pk), "paid", "cash")
    assert data["idempotency_key"] is None
    assert data["consumed_by"] is None
    run_pending()
    assert run.steps.get(name="paid").output == "cash"
    assert status_of(Run, run.pk) == "completed"


def test_signal_without_payload_sends_null():
    run = waiting_payment()
    assert run_json("workflows_signal", str(run.pk), "paid")["payload"] is None
    assert run.steps.get(name="paid").output is None


def test_signal_with_an_idempotency_key_is_sent_once_or_names_the_conflict():
    run = workflows.start_run(Payment, {})
    args = [str(run.pk), "paid", "--idempotency-key", "K-1", "--payload"]
    first = run_json("workflows_signal", *args, "[1, 2]")
    again = run_json("workflows_signal", *args, "[1, 2]")
    assert again["id"] == first["id"]
    assert first["idempotency_key"] == "K-1"
    refused(
        "workflows_signal",
        *args,
        "[3]",
        message=f"idempotency key 'K-1' was used for signal 'paid' of run {run.pk} "
        "with a different name or payload",
    )
    assert Signal.objects.count() == 1


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("{amount: 12}", "argument --payload: not valid JSON: Expecting property name"),
        ("NaN", "argument --payload: not valid JSON: NaN is not a JSON value"),
        ("", "argument --payload: not valid JSON: Expecting value"),
    ],
)
def test_signal_refuses_malformed_json(payload, message):
    run = waiting_payment()
    refused("workflows_signal", str(run.pk), "paid", "--payload", payload, message=message)
    assert not Signal.objects.exists()


def test_signal_refuses_unknown_and_finished_runs():
    refused(
        "workflows_signal",
        "00000000-0000-0000-0000-000000000000",
        "paid",
        message="no run has id 00000000-0000-0000-0000-000000000000",
    )
    refused("workflows_signal", "run-1", "paid", message="'run-1' is not a run id")
    run = waiting_payment()
    run_command("workflows_signal", str(run.pk), "paid")
    run_pending()
    refused(
        "workflows_signal",
        str(run.pk),
        "paid",
        message=f"run {run.pk} is completed; only running, waiting or paused runs accept signals",
    )
    assert Signal.objects.count() == 1


# workflows_cancel


def test_cancel_compensates_and_records_who_and_why(manager):
    run = waiting_payment()
    output = run_command(
        "workflows_cancel", str(run.pk), "--reason", "order withdrawn", "--user", "manager"
    )
    assert output == f"run {run.pk} of opcmd_payment v1: cancelling\n"
    run_pending()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert UNDONE == ["reserve"]
    assert run.error["message"] == "order withdrawn"
    requested = run.events.get(type="run.cancel_requested")
    assert (requested.payload["by"], requested.payload["compensate"]) == ("manager", True)


def test_cancel_without_compensation_json():
    run = waiting_payment()
    data = run_json("workflows_cancel", str(run.pk), "--no-compensate")
    assert (data["id"], data["status"]) == (str(run.pk), "cancelled")
    run_pending()
    assert UNDONE == []
    assert run.events.get(type="run.cancel_requested").payload["by"] is None


def test_cancel_refuses_finished_unknown_runs_and_unknown_users():
    run = waiting_payment()
    refused("workflows_cancel", str(run.pk), "--user", "ghost", message="no user named 'ghost'")
    run_command("workflows_cancel", str(run.pk), "--no-compensate")
    # A second cancel is no refusal: it says so, records nothing and exits 0.
    events = Event.objects.count()
    again = run_command("workflows_cancel", str(run.pk))
    assert again.endswith(": cancelled (cancelled already; nothing changed)\n")
    assert Event.objects.count() == events
    refused("workflows_cancel", "nope", message="'nope' is neither a run id nor a prefix of one")


# workflows_retry


def test_retry_run_resumes_a_failed_run(manager):
    run = failed_pipeline()
    output = run_command("workflows_retry", str(run.pk), "--user", "manager")
    assert output == f"run {run.pk} of opcmd_pipeline v1: running\n"
    run_pending()
    assert status_of(Run, run.pk) == "completed"
    assert run.events.filter(type="step.retried", payload__by="manager").count() == 1


def test_retry_one_step_json():
    run = failed_pipeline()
    load = run.steps.get(name="load")
    data = run_json("workflows_retry", "--step", str(load.pk))
    assert (data["id"], data["name"], data["status"]) == (load.pk, "load", "ready")
    # numbered within the retry's new round: none made yet, of a fresh budget of one
    assert (data["attempt"], data["max_attempts"]) == (0, 1)
    assert status_of(Run, run.pk) == "running"
    run_pending()
    assert status_of(Run, run.pk) == "completed"


def test_retry_run_json_and_step_line():
    run = failed_pipeline()
    assert run_json("workflows_retry", str(run.pk))["status"] == "running"
    run_pending()
    run = failed_pipeline()
    load = run.steps.get(name="load")
    assert run_command("workflows_retry", f"--step={load.pk}") == (
        f"step {load.pk} 'load' (task) of run {run.pk}: ready\n"
    )


def test_retry_refuses_runs_and_steps_that_did_not_fail():
    run = failed_pipeline()
    extract = run.steps.get(name="extract")
    refused(
        "workflows_retry",
        "--step",
        str(extract.pk),
        message="step 'extract': step is completed; retry_step needs failed, timed_out",
    )
    run_command("workflows_retry", str(run.pk))
    run_pending()
    refused(
        "workflows_retry",
        str(run.pk),
        message=f"run {run.pk}: run is completed; retry needs cancelled, compensated, "
        "compensation_failed, failed, terminated",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "one of the arguments RUN --step is required"),
        (["--step", "1", "00000000-0000-0000-0000-000000000000"], "not allowed with argument"),
        (["00000000-0000-0000-0000-000000000000"], "no run has id 00000000-0000-0000-0000"),
        (["--step", "999999"], "no step has id 999999"),
        (["--step", "last"], "'last' is not a step id"),
    ],
)
def test_retry_needs_exactly_one_known_target(args, message):
    refused("workflows_retry", *args, message=message)


def test_retry_refuses_an_unknown_user():
    run = failed_pipeline()
    refused("workflows_retry", str(run.pk), "--user", "ghost", message="no user named 'ghost'")
    assert status_of(Run, run.pk) == "failed"


# workflows_skip


def test_skip_a_failed_step_with_an_output(manager):
    run = failed_pipeline()
    load = run.steps.get(name="load")
    output = run_command(
        "workflows_skip", str(load.pk), "--output", '{"rows": 0}', "--user", "manager"
    )
    assert output == f"step {load.pk} 'load' (task) of run {run.pk}: completed\n"
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.output == {"load": {"rows": 0}}
    assert run.events.filter(type="step.skipped", payload__by="manager").exists()


def test_skip_a_waiting_gate_json():
    gate = waiting_gate()
    User.objects.create_superuser("root")
    data = run_json(
        "workflows_skip", str(gate.pk), "--user", "root", "--output", '{"feedback": "by hand"}'
    )
    assert (data["id"], data["status"]) == (gate.pk, "completed")
    assert (data["decision"], data["decided_by"], data["decided_via"]) == (
        "approved",
        "root",
        "skip",
    )
    assert (data["output"]["decision"], data["output"]["feedback"]) == ("approved", "by hand")
    run_pending()
    assert status_of(Run, gate.run_id) == "completed"


def test_skip_refuses_finished_steps_malformed_output_and_unknown_steps():
    run = failed_pipeline()
    extract = run.steps.get(name="extract")
    load = run.steps.get(name="load")
    refused(
        "workflows_skip",
        str(extract.pk),
        message="step 'extract': step is completed; skip_step needs ",
    )
    refused(
        "workflows_skip",
        str(load.pk),
        "--output",
        "{rows: 0}",
        message="argument --output: not valid JSON",
    )
    refused("workflows_skip", str(load.pk), "--user", "ghost", message="no user named 'ghost'")
    refused("workflows_skip", "0", message="no step has id 0")
    assert status_of(Step, load.pk) == "failed"
