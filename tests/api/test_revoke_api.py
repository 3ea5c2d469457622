"""``POST /api/steps/{id}/revoke/`` (a step's, an item's or a compensation's running
attempt) and the idempotent ``POST /api/runs/{id}/cancel/`` (``"already"``)."""

from __future__ import annotations

import pytest

import workflows
from tests.support import revoke
from tests.support.revoke import Parcels, Wedged
from workflows.engine import claim_step
from workflows.models import CompensationRecord, Event, Run, Step
from workflows.testing import run_pending

from .test_api_basics import assert_error
from .test_run_operations import post

pytestmark = pytest.mark.django_db


def running_load(owner: str = "host-1:1:1") -> tuple[Run, Step]:
    return revoke.running_load(owner)


def revoke_url(step: Step) -> str:
    return f"/api/steps/{step.pk}/revoke/"


def test_revoke_a_running_step(api):
    run, step = running_load()
    response = post(api, revoke_url(step), {"attempt": 1, "reason": "worker hung"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["revoked"], body["reason"], body["revoked_attempt"]) == (True, None, 1)
    assert {key: body[key] for key in ("kind", "id", "item", "status", "attempt")} == {
        "kind": "step",
        "id": step.pk,
        "item": None,
        "status": "ready",
        "attempt": 1,
    }
    assert (body["max_attempts"], body["failure_class"]) == (2, "revoked")
    assert body["error"]["by"] == "operator-user" and body["error"]["owner"] == "host-1:1:1"
    assert body["step"]["id"] == step.pk and body["step"]["status"] == "ready"
    payload = Event.objects.get(run=run, type="lease.revoked").payload
    assert (payload["by"], payload["reason"]) == ("operator-user", "worker hung")
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_revoke_an_item_by_its_key_and_a_compensation(api):
    run, _ = revoke.running_item("p2", "host-2:1:1")
    ship = Step.objects.get(run=run, name="ship")
    response = post(api, revoke_url(ship), {"item": "p2", "attempt": 1})
    assert response.status_code == 200, response.content
    assert (response.json()["kind"], response.json()["item"]) == ("item", "p2")
    assert response.json()["step"]["id"] == ship.pk

    undoing, record = revoke.running_compensation("host-3:1:1")
    reserve = Step.objects.get(run=undoing, name="reserve")
    response = post(
        api, revoke_url(reserve), {"compensation": True, "reason": "stuck", "attempt": 1}
    )
    assert response.status_code == 200, response.content
    assert (response.json()["kind"], response.json()["id"]) == ("compensation", record.pk)
    assert CompensationRecord.objects.get(pk=record.pk).status == "ready"


def test_a_unit_not_in_the_attempt_is_a_200_that_revoked_nothing(api):
    run = workflows.start_run(Wedged)
    step = Step.objects.get(run=run, name="load")
    response = post(api, revoke_url(step), {"attempt": 1})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["revoked"], body["reason"], body["status"]) == (False, "not_started", "ready")
    assert not Event.objects.filter(run=run, type="lease.revoked").exists()


def test_a_fan_out_step_itself_is_a_409_saying_what_is_allowed(api):
    ship = Step.objects.get(run=workflows.start_run(Parcels), name="ship")
    error = assert_error(post(api, revoke_url(ship), {"attempt": 1}), 409, "invalid_state")
    assert "revoke one of its running items" in error["message"]
    assert error["details"]["verb"] == "revoke"
    assert any(action["verb"] == "cancel" for action in error["details"]["allowed_actions"])


def test_a_second_identical_request_is_200_revoked_false_never_a_new_revocation(api):
    run, step = running_load()
    first = post(api, revoke_url(step), {"attempt": 1, "reason": "hung"})
    assert (first.status_code, first.json()["revoked"]) == (200, True)
    again = post(api, revoke_url(step), {"attempt": 1, "reason": "hung"})
    assert again.status_code == 200, again.content
    assert (again.json()["revoked"], again.json()["reason"]) == (False, "already_revoked")
    assert again.json()["max_attempts"] == first.json()["max_attempts"] == 2
    claim_step(step.pk, "host-2:2:2")  # attempt 2 replaced the wedged one
    late = post(api, revoke_url(step), {"attempt": 1, "reason": "hung"})
    assert (late.status_code, late.json()["revoked"], late.json()["reason"]) == (
        200,
        False,
        "replaced",
    )
    assert (late.json()["status"], late.json()["attempt"]) == ("running", 2)
    assert Event.objects.filter(run=run, type="lease.revoked").count() == 1


def test_the_attempt_is_required(api):
    _, step = running_load()
    for body in ({}, {"reason": "x"}, {"attempt": None}, {"attempt": 0}, {"attempt": "one"}):
        error = assert_error(post(api, revoke_url(step), body), 400, "validation_error")
        assert "attempt" in error["details"], body
    assert Step.objects.get(pk=step.pk).status == "running"


def test_unknown_steps_items_and_bad_bodies(api):
    _, step = running_load()
    assert_error(post(api, "/api/steps/123456/revoke/"), 404, "step_not_found")
    assert_error(post(api, "/api/steps/x/revoke/"), 404, "step_not_found")
    ship = Step.objects.get(run=workflows.start_run(Parcels), name="ship")
    error = assert_error(
        post(api, revoke_url(ship), {"item": "nope", "attempt": 1}), 404, "step_not_found"
    )
    assert "has no item 'nope'" in error["message"]
    for body, field in (
        ({"reasn": "x"}, "reasn"),
        ({"reason": 5}, "reason"),
        ({"compensation": "yes"}, "compensation"),
        ({"item": 3}, "item"),
    ):
        response = post(api, revoke_url(step), {"attempt": 1, **body})
        assert field in assert_error(response, 400, "validation_error")["details"], body
    assert Step.objects.get(pk=step.pk).status == "running"


@pytest.mark.parametrize(
    ("role", "status"),
    [("anonymous", 401), ("nobody", 403), ("viewer", 403), ("starter", 403), ("operator", 200)],
)
def test_revoking_needs_the_operate_permission(api, role, status):
    _, step = running_load()
    response = post(api, revoke_url(step), {"attempt": 1}, role=role)
    assert response.status_code == status, response.content
    assert Step.objects.get(pk=step.pk).status == ("ready" if status == 200 else "running")


def test_the_schema_documents_the_revoke(api):
    schema = api("viewer").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    operation = schema.json()["paths"]["/api/steps/{id}/revoke/"]["post"]
    assert {"200", "400", "401", "403", "404", "409"} <= set(operation["responses"])
    components = schema.json()["components"]["schemas"]
    revoke = components["RevokeRequest"]
    assert {"item", "compensation", "reason", "attempt", "round"} == set(revoke["properties"])
    assert "attempt" in revoke["required"]
    assert {"revoked", "reason", "revoked_attempt"} <= set(components["Revoked"]["properties"])
    assert "already" in components["CancelledRun"]["properties"]


# -- a second cancel ---------------------------------------------------------------------


def test_a_second_cancel_answers_200_already_and_records_nothing(api):
    run = workflows.start_run(Wedged)
    first = post(api, f"/api/runs/{run.pk}/cancel/", {"reason": "dup"})
    assert first.status_code == 200, first.content
    assert (first.json()["already"], first.json()["status"]) == (False, "cancelled")
    events = Event.objects.filter(run=run).count()
    version = Run.objects.get(pk=run.pk).version
    again = post(api, f"/api/runs/{run.pk}/cancel/", {"reason": "dup again"})
    assert again.status_code == 200, again.content
    assert (again.json()["already"], again.json()["status"]) == (True, "cancelled")
    assert set(first.json()) == set(again.json())  # the run detail, and "already"
    assert Event.objects.filter(run=run).count() == events
    assert Run.objects.get(pk=run.pk).version == version


def test_a_cancel_of_a_terminated_run_is_already_and_of_a_completed_one_a_409(api):
    terminated = workflows.start_run(Wedged)
    workflows.terminate_run(terminated)
    response = post(api, f"/api/runs/{terminated.pk}/cancel/")
    assert (response.status_code, response.json()["already"]) == (200, True)
    completed = workflows.start_run(Wedged)
    run_pending()
    assert_error(post(api, f"/api/runs/{completed.pk}/cancel/"), 409, "invalid_state")
