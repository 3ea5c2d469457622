"""Run variables over HTTP: ``variables`` when starting (a 400 naming the field and the
rule otherwise, nothing written), the run detail's ``variables``, and an external
worker's completion carrying a patch, committed with its output."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.handlers import WORK
from workflows import Task, Workflow
from workflows.models import Event, Run, Step

from .test_api_basics import assert_error
from .test_work_api import claimed, post, started, worker  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


class Noted(Workflow):
    name = "api_variables_noted"
    note = Task(WORK)


def start(api: Any, **body: Any) -> Any:
    return api("starter").post("/api/runs/", {"workflow": Noted.name, **body}, format="json")


def test_a_start_with_variables_gives_the_run_its_first_ones_and_the_detail_shows_them(api):
    response = start(api, variables={"region": "eu", "limits": {"max": 3}})
    assert response.status_code == 201, response.content
    assert response.json()["variables"] == {"region": "eu", "limits": {"max": 3}}
    run = Run.objects.get()
    detail = api("viewer").get(f"/api/runs/{run.pk}/").json()
    assert detail["variables"] == {"region": "eu", "limits": {"max": 3}}


def test_a_run_started_without_variables_shows_an_empty_object(api):
    response = start(api)
    assert response.status_code == 201, response.content
    assert response.json()["variables"] == {}


@pytest.mark.parametrize(
    ("variables", "problem"),
    [
        ([1, 2], "must be a JSON object"),
        ("text", "must be a JSON object"),
        ({"bad\u0000key": 1}, "NUL"),
        ({"blob": "x" * 300}, "MAX_VARIABLES_BYTES"),
    ],
)
def test_bad_variables_are_a_400_naming_the_field_and_nothing_is_written(
    api: Any, settings: Any, variables: Any, problem: str
):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VARIABLES_BYTES": 256}
    error = assert_error(start(api, variables=variables), 400, "invalid_input")
    assert "variables" in error["message"] or error["details"].get("field") == "variables"
    assert problem in error["message"]
    assert not Run.objects.exists()


def test_an_external_worker_completes_with_a_patch_of_the_variables(worker):  # noqa: F811
    run = started(variables={"printed": 0, "drop": True})
    job = claimed(worker)
    body = {"lease": job["lease"], "output": 2, "variables": {"printed": 2, "drop": None}}
    done = post(worker, "complete", body)
    assert done.status_code == 200, done.content
    run.refresh_from_db()
    assert run.variables == {"printed": 2}
    write = Event.objects.filter(run=run, type="run.variables_set").latest("id").payload
    assert (write["step"], write["attempt"], write["patches"]) == (
        "print_labels",
        1,
        [{"printed": 2, "drop": None}],
    )


@pytest.mark.parametrize(
    ("patch", "problem"),
    [([1], "must be a JSON object"), ({"blob": "x" * 300}, "MAX_VARIABLES_BYTES")],
)
def test_an_external_workers_bad_patch_is_a_400_and_writes_nothing(
    worker,  # noqa: F811
    settings: Any,
    patch: Any,
    problem: str,
):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VARIABLES_BYTES": 256}
    run = started()
    job = claimed(worker)
    response = post(worker, "complete", {"lease": job["lease"], "output": 1, "variables": patch})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert problem in error["message"]
    step = Step.objects.get(run=run)
    assert (step.status, step.output) == ("running", None)
    run.refresh_from_db()
    assert run.variables == {}
