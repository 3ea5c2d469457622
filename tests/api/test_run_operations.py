"""Operator verbs over HTTP: one run or step at a time, in bulk, and signals; a refused
verb is a 409 ``invalid_state`` saying what is allowed; the actor is recorded."""

from __future__ import annotations

import uuid

import pytest

import workflows
from tests.support.handlers import BROKEN, WORK
from tests.support.runs import run_inline
from workflows import Gate, Retry, Task, WaitForSignal, Workflow
from workflows.models import Event, Run, Signal
from workflows.testing import run_pending

from .test_api_basics import assert_error

pytestmark = pytest.mark.django_db


class Approval(Workflow):
    name = "api_ops_approval"
    approve = Gate(prompt="ok?")
    then = Task(WORK)


class Pipeline(Workflow):
    name = "api_ops_pipeline"
    extract = Task(WORK, retry=Retry(max_attempts=1))
    load = Task(WORK, after=["extract"], retry=Retry(max_attempts=1))


class Payment(Workflow):
    name = "api_ops_payment"
    paid = WaitForSignal("paid")
    receipt = Task(WORK, after=["paid"])


def failed_pipeline() -> Run:
    BROKEN.add("load")
    run = run_inline(Pipeline)
    assert run.status == "failed"
    BROKEN.clear()
    return run


def post(api, url: str, body: object = None, role: str = "operator", **headers: str):
    return api(role).post(url, body if body is not None else {}, format="json", **headers)


def last_event(run: Run, type_: str) -> dict:
    return Event.objects.filter(run=run, type=type_).latest("id").payload


# One run at a time.


def test_pause_and_resume_record_who_and_answer_the_run(api):
    run = workflows.start_run(Approval)
    paused = post(api, f"/api/runs/{run.pk}/pause/", {"reason": "maintenance"})
    assert paused.status_code == 200, paused.content
    assert paused.json()["status"] == "paused"
    assert paused.json()["waiting_on"][0]["kind"] == "paused"
    assert last_event(run, "run.pause_requested")["by"] == "operator-user"
    resumed = post(api, f"/api/runs/{run.pk}/resume/")
    assert resumed.status_code == 200 and resumed.json()["status"] == "waiting"


def test_cancel_without_compensation(api):
    run = workflows.start_run(Approval)
    response = post(api, f"/api/runs/{run.pk}/cancel/", {"reason": "dup", "compensate": False})
    assert response.status_code == 200, response.content
    run.refresh_from_db()
    assert run.skip_compensation is True
    payload = last_event(run, "run.cancel_requested")
    assert payload["reason"] == "dup" and payload["by"] == "operator-user"


def test_terminate_stops_the_run(api):
    run = workflows.start_run(Approval)
    response = post(api, f"/api/runs/{run.pk}/terminate/", {"reason": "stop"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "terminated"


def test_retry_and_rerun_a_failed_run(api):
    run = failed_pipeline()
    retried = post(api, f"/api/runs/{run.pk}/retry/")
    assert retried.status_code == 200 and retried.json()["status"] == "running"
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    rerun = post(api, f"/api/runs/{run.pk}/rerun/", {"from_step": "load", "reason": "again"})
    assert rerun.status_code == 200, rerun.content
    steps = {step["name"]: step["status"] for step in rerun.json()["steps"]}
    assert steps["extract"] == "completed" and steps["load"] != "completed"


def test_rerun_from_an_unknown_step_is_a_404(api):
    run = failed_pipeline()
    response = post(api, f"/api/runs/{run.pk}/rerun/", {"from_step": "nowhere"})
    assert_error(response, 404, "step_not_found")


def test_a_refused_verb_is_a_409_with_the_allowed_actions(api):
    run = workflows.start_run(Approval)
    error = assert_error(post(api, f"/api/runs/{run.pk}/resume/"), 409, "invalid_state")
    assert "paused" in error["message"]
    allowed = {
        action["verb"] for action in error["details"]["allowed_actions"] if action["allowed"]
    }
    assert {"cancel", "pause", "terminate"} <= allowed and "resume" not in allowed
    assert error["details"]["verb"] == "resume"


@pytest.mark.parametrize(
    ("verb", "body", "field"),
    [
        ("cancel", {"compensate": "no"}, "compensate"),
        ("cancel", {"reason": 5}, "reason"),
        ("pause", {"why": "x"}, "why"),
        ("resume", {"reason": "x"}, "reason"),
        ("rerun", {}, "from_step"),
        ("rerun", {"from_step": ["load"]}, "from_step"),
    ],
)
def test_a_bad_verb_body_is_a_400_naming_the_field(api, verb, body, field):
    run = workflows.start_run(Approval)
    response = post(api, f"/api/runs/{run.pk}/{verb}/", body)
    assert field in assert_error(response, 400, "validation_error")["details"]


def test_a_verb_on_an_unknown_run_is_a_404(api):
    assert_error(post(api, f"/api/runs/{uuid.uuid4()}/cancel/"), 404, "run_not_found")
    assert_error(post(api, "/api/runs/nope/pause/"), 404, "run_not_found")


def test_a_verb_is_a_post(api):
    run = workflows.start_run(Approval)
    response = api("operator").get(f"/api/runs/{run.pk}/cancel/")
    assert_error(response, 405, "method_not_allowed")


# Steps.


def test_retry_a_failed_step(api):
    run = failed_pipeline()
    load = run.steps.get(name="load")
    response = post(api, f"/api/steps/{load.pk}/retry/")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "ready" and response.json()["id"] == load.pk
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"


def test_skip_a_waiting_gate_with_an_output(api):
    run = workflows.start_run(Approval)
    gate = run.steps.get(name="approve")
    response = post(api, f"/api/steps/{gate.pk}/skip/", {"output": {"feedback": "by hand"}})
    assert response.status_code == 200, response.content
    output = response.json()["output"]
    assert (response.json()["status"], output["decision"], output["feedback"]) == (
        "completed",
        "approved",
        "by hand",
    )


def test_a_refused_step_verb_is_a_409_with_the_run_s_allowed_actions(api):
    run = workflows.start_run(Approval)
    gate = run.steps.get(name="approve")
    error = assert_error(post(api, f"/api/steps/{gate.pk}/retry/"), 409, "invalid_state")
    skip = next(
        action
        for action in error["details"]["allowed_actions"]
        if action["verb"] == "skip_step" and action["step_id"] == gate.pk
    )
    assert skip["allowed"] is True


def test_a_step_verb_refuses_unknown_fields_and_ids(api):
    run = workflows.start_run(Approval)
    gate = run.steps.get(name="approve")
    response = post(api, f"/api/steps/{gate.pk}/skip/", {"outptu": 1})
    assert "outptu" in assert_error(response, 400, "validation_error")["details"]
    assert_error(post(api, "/api/steps/123456/skip/"), 404, "step_not_found")


# Bulk.


def test_bulk_by_ids_is_a_dry_run_unless_told_otherwise(api):
    waiting = workflows.start_run(Approval)
    failed = failed_pipeline()
    ids = [str(waiting.pk), str(failed.pk)]
    dry = post(api, "/api/runs/bulk/cancel/", {"ids": ids})
    assert dry.status_code == 200, dry.content
    body = dry.json()
    assert body["dry_run"] is True and body["totals"] == {"matched": 2, "eligible": 1, "skipped": 1}
    outcomes = {item["run"]: item["outcome"] for item in body["runs"]}
    assert outcomes == {str(waiting.pk): "eligible", str(failed.pk): "skipped"}
    waiting.refresh_from_db()
    assert waiting.status == "waiting"
    applied = post(api, "/api/runs/bulk/cancel/", {"ids": ids, "dry_run": False, "reason": "r"})
    assert applied.json()["totals"] == {"matched": 2, "done": 1, "skipped": 1, "failed": 0}
    assert last_event(waiting, "run.cancel_requested")["by"] == "operator-user"


def test_bulk_by_filter(api):
    first, second = failed_pipeline(), failed_pipeline()
    waiting = workflows.start_run(Approval)
    body = {"filter": {"status": ["failed"], "workflow": "api_ops_pipeline"}, "dry_run": False}
    response = post(api, "/api/runs/bulk/retry/", body)
    assert response.status_code == 200, response.content
    assert response.json()["totals"]["done"] == 2
    assert {item["run"] for item in response.json()["runs"]} == {str(first.pk), str(second.pk)}
    waiting.refresh_from_db()
    assert waiting.status == "waiting"
    rerun = post(
        api,
        "/api/runs/bulk/rerun/",
        {"filter": {"workflow": "api_ops_pipeline", "older_than": "PT0S"}, "from_step": "load"},
    )
    assert rerun.status_code == 200 and rerun.json()["totals"]["matched"] == 2


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"ids": [str(uuid.uuid4())], "filter": {"status": ["failed"]}}, 400, "validation_error"),
        ({}, 400, "validation_error"),
        ({"ids": [str(uuid.uuid4()) for _ in range(1001)]}, 400, "validation_error"),
        ({"ids": ["not-a-uuid"]}, 400, "validation_error"),
        ({"filter": {}}, 400, "validation_error"),
        ({"filter": {"status": ["lost"]}}, 400, "validation_error"),
        ({"filter": {"older_than": "soon"}}, 400, "validation_error"),
        ({"filter": {"older_than": "P99999999D"}}, 400, "validation_error"),
        ({"filter": {"workflow": "x"}, "dry_run": "no"}, 400, "validation_error"),
        ({"filter": {"workflow": "x"}, "from_step": "load"}, 400, "invalid_input"),
    ],
)
def test_a_bad_bulk_is_refused(api, body, status, code):
    assert_error(post(api, "/api/runs/bulk/cancel/", body), status, code)


def test_an_unknown_bulk_verb_is_refused(api):
    response = post(api, "/api/runs/bulk/explode/", {"filter": {"workflow": "x"}})
    assert "explode" in assert_error(response, 400, "invalid_input")["message"]


# Signals.


def test_a_signal_is_delivered_once_per_key(api):
    run = workflows.start_run(Payment)
    url = f"/api/runs/{run.pk}/signals/"
    first = post(api, url, {"name": "paid", "payload": {"amount": 5}}, HTTP_IDEMPOTENCY_KEY="p-1")
    assert first.status_code == 201, first.content
    assert first.json()["name"] == "paid" and first.json()["consumed_by"] == "paid"
    again = post(api, url, {"name": "paid", "payload": {"amount": 5}, "idempotency_key": "p-1"})
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    other = post(api, url, {"name": "paid", "payload": {"amount": 6}}, HTTP_IDEMPOTENCY_KEY="p-1")
    assert_error(other, 409, "idempotency_conflict")
    assert Signal.objects.filter(run=run).count() == 1


def test_a_signal_the_run_never_waits_for_is_refused(api):
    run = workflows.start_run(Payment)
    response = post(api, f"/api/runs/{run.pk}/signals/", {"name": "shipped"})
    error = assert_error(response, 400, "unknown_signal")
    assert error["details"]["waits_for"] == ["paid"]


def test_a_signal_to_a_finished_run_is_an_invalid_state(api):
    run = workflows.start_run(Approval)
    post(api, f"/api/runs/{run.pk}/terminate/")
    response = post(api, f"/api/runs/{run.pk}/signals/", {"name": "paid"})
    # Approval waits for no signal: the name is refused before the run's state is.
    assert_error(response, 400, "unknown_signal")
    payment = workflows.start_run(Payment)
    post(api, f"/api/runs/{payment.pk}/terminate/")
    error = assert_error(
        post(api, f"/api/runs/{payment.pk}/signals/", {"name": "paid"}), 409, "invalid_state"
    )
    assert any(action["verb"] == "rerun" for action in error["details"]["allowed_actions"])


@pytest.mark.parametrize(
    ("body", "field"),
    [({"payload": 1}, "name"), ({"name": 5}, "name"), ({"name": "paid", "extra": 1}, "extra")],
)
def test_a_bad_signal_body_is_a_400(api, body, field):
    run = workflows.start_run(Payment)
    response = post(api, f"/api/runs/{run.pk}/signals/", body)
    assert field in assert_error(response, 400, "validation_error")["details"]


# Who may operate.

OPERATIONS = [
    ("/api/runs/{run}/pause/", {}),
    ("/api/runs/{run}/signals/", {"name": "paid"}),
    ("/api/steps/{step}/skip/", {}),
    ("/api/runs/bulk/cancel/", {"ids": ["{run}"]}),
]


@pytest.mark.parametrize(
    ("role", "status"),
    [("anonymous", 401), ("nobody", 403), ("viewer", 403), ("starter", 403), ("operator", 200)],
)
@pytest.mark.parametrize(("url", "body"), OPERATIONS)
def test_operating_needs_the_operate_permission(api, role, status, url, body):
    run = workflows.start_run(Payment)
    step = run.steps.get(name="receipt")
    filled = {
        key: [item.format(run=run.pk) for item in value] if isinstance(value, list) else value
        for key, value in body.items()
    }
    response = post(api, url.format(run=run.pk, step=step.pk), filled, role=role)
    expected = 201 if status == 200 and url.endswith("signals/") else status
    assert response.status_code == expected, response.content
