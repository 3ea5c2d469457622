"""``POST /runs/{id}/priority/`` and ``priority`` when starting a run over HTTP."""

from __future__ import annotations

import pytest

import workflows
from tests.support.handlers import WORK
from workflows import Task, WaitForSignal, Workflow
from workflows.models import Event, Run
from workflows.testing import run_pending

from .test_api_basics import assert_error

pytestmark = pytest.mark.django_db


class Limited(Workflow):
    name = "api_priority_limited"
    max_concurrent_runs = 1
    hold = WaitForSignal("go")
    then = Task(WORK)


def url(run: Run) -> str:
    return f"/api/runs/{run.pk}/priority/"


def test_change_priority_answers_the_run_and_records_who(api):
    run = workflows.start_run(Limited)
    response = api("operator").post(url(run), {"priority": 30}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["priority"] == 30
    assert any(a["verb"] == "priority" and a["allowed"] for a in body["allowed_actions"])
    event = Event.objects.get(run=run, type="run.priority_changed").payload
    assert (event["from"], event["to"], event["by"]) == (0, 30, "operator-user")


def test_a_queued_run_moves_ahead_in_its_queue(api):
    first = workflows.start_run(Limited)
    older = workflows.start_run(Limited)
    newer = workflows.start_run(Limited)
    assert api("operator").post(url(newer), {"priority": 5}, format="json").status_code == 200
    workflows.send_signal(first, "go")
    run_pending()
    statuses = dict(Run.objects.values_list("id", "status"))
    assert (statuses[older.pk], statuses[newer.pk]) == ("queued", "waiting")


@pytest.mark.parametrize(
    "body",
    [{}, {"priority": "5"}, {"priority": 5.5}, {"priority": True}, {"priority": 1001}, []],
)
def test_a_malformed_body_is_a_400_naming_the_field(api, body):
    run = workflows.start_run(Limited)
    error = assert_error(
        api("operator").post(url(run), body, format="json"), 400, "validation_error"
    )
    if isinstance(body, dict):
        assert "priority" in error["details"], error
    assert Run.objects.get(pk=run.pk).priority == 0


def test_an_unknown_field_is_refused(api):
    run = workflows.start_run(Limited)
    response = api("operator").post(url(run), {"priority": 1, "priorty": 2}, format="json")
    error = assert_error(response, 400, "validation_error")
    assert "priorty" in error["details"]


@pytest.mark.parametrize(("role", "status"), [("viewer", 403), ("starter", 403), ("nobody", 403)])
def test_changing_priority_needs_the_operate_permission(api, role, status):
    run = workflows.start_run(Limited)
    response = api(role).post(url(run), {"priority": 3}, format="json")
    assert_error(response, status, "permission_denied")
    assert Run.objects.get(pk=run.pk).priority == 0


def test_a_finished_run_is_a_409_with_what_is_allowed(api):
    run = workflows.start_run(Limited)
    workflows.terminate_run(run)
    error = assert_error(
        api("operator").post(url(run), {"priority": 3}, format="json"), 409, "invalid_state"
    )
    assert "priority needs" in error["message"]
    assert "allowed_actions" in error["details"]


def test_start_takes_a_priority_and_validates_it(api):
    started = api("starter").post(
        "/api/runs/", {"workflow": "api_priority_limited", "priority": -7}, format="json"
    )
    assert started.status_code == 201, started.content
    assert started.json()["priority"] == -7
    refused = api("starter").post(
        "/api/runs/", {"workflow": "api_priority_limited", "priority": "high"}, format="json"
    )
    assert "priority" in assert_error(refused, 400, "validation_error")["details"]
