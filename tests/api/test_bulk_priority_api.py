"""``POST /api/runs/bulk/priority/``: the bulk verb that takes a value, ``priority``,
validated as the single ``/runs/{id}/priority/`` validates it."""

from __future__ import annotations

from typing import Any

import pytest

import workflows
from workflows import PermanentError, Retry, Task, WaitForSignal, Workflow
from workflows.models import Event, Run
from workflows.testing import run_pending

from .test_api_basics import assert_error

pytestmark = pytest.mark.django_db
HERE = "tests.api.test_bulk_priority_api"
URL = "/api/runs/bulk/priority/"


def work(ctx) -> str:
    if ctx.input.get("fail"):
        raise PermanentError("asked to fail")
    return ctx.step_name


class Held(Workflow):
    """Waits for a signal after its first step, or fails there when told to."""

    name = "api_bulk_priority_held"
    first = Task(f"{HERE}.work", retry=Retry(max_attempts=1))
    go = WaitForSignal("go")


@pytest.fixture
def runs() -> dict[str, Run]:
    waiting = workflows.start_run(Held, {})
    failed = workflows.start_run(Held, {"fail": True})
    run_pending()
    found = {"waiting": waiting, "failed": failed}
    assert {name: Run.objects.get(pk=run.pk).status for name, run in found.items()} == {
        "waiting": "waiting",
        "failed": "failed",
    }
    return found


def post(api: Any, body: Any) -> Any:
    return api("operator").post(URL, body, format="json")


def priorities() -> dict[str, int]:
    return {str(pk): priority for pk, priority in Run.objects.values_list("pk", "priority")}


def test_a_dry_run_says_which_runs_would_change_and_changes_nothing(api, runs):
    response = post(api, {"filter": {"workflow": Held.name}, "priority": 40})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["verb"], body["dry_run"]) == ("priority", True)
    assert body["totals"] == {"matched": 2, "eligible": 1, "skipped": 1}
    outcomes = {item["run"]: (item["outcome"], item["reason"]) for item in body["runs"]}
    assert outcomes[str(runs["waiting"].pk)] == ("eligible", "")
    assert outcomes[str(runs["failed"].pk)][0] == "skipped"
    assert outcomes[str(runs["failed"].pk)][1].startswith("run is failed; priority needs")
    assert set(priorities().values()) == {0}
    assert not Event.objects.filter(type="run.priority_changed").exists()


def test_applied_it_changes_each_eligible_run_as_the_caller(api, runs):
    ids = [str(runs["waiting"].pk), str(runs["failed"].pk)]
    response = post(api, {"ids": ids, "priority": -25, "dry_run": False})
    assert response.status_code == 200, response.content
    assert response.json()["totals"] == {"matched": 2, "done": 1, "skipped": 1, "failed": 0}
    assert priorities() == {ids[0]: -25, ids[1]: 0}
    event = Event.objects.get(run=runs["waiting"], type="run.priority_changed").payload
    assert (event["from"], event["to"], event["by"]) == (0, -25, "operator-user")


@pytest.mark.parametrize("value", ["5", 5.5, True, 1001, -1001, None])
def test_a_malformed_priority_is_the_single_verbs_400_naming_the_field(api, runs, value):
    ids = [str(runs["waiting"].pk)]
    for url, body in (
        (URL, {"ids": ids, "priority": value, "dry_run": False}),
        (f"/api/runs/{ids[0]}/priority/", {"priority": value}),
    ):
        response = api("operator").post(url, body, format="json")
        assert "priority" in assert_error(response, 400, "validation_error")["details"], url
    assert set(priorities().values()) == {0}


def test_a_missing_priority_is_refused_before_anything_is_read(api, runs):
    response = post(api, {"filter": {"workflow": Held.name}, "dry_run": False})
    error = assert_error(response, 400, "invalid_input")
    assert error["message"] == "priority needs priority: the new priority, -1000 to 1000"
    assert set(priorities().values()) == {0}


def test_another_verb_refuses_a_priority(api, runs):
    response = api("operator").post(
        "/api/runs/bulk/cancel/", {"filter": {"workflow": Held.name}, "priority": 3}, format="json"
    )
    assert "not priority" in assert_error(response, 400, "invalid_input")["message"]
