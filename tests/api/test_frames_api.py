"""``GET /api/runs/{id}/steps/{step}/frames/`` and the telemetry fields of steps."""

from __future__ import annotations

from typing import Any

import pytest

import workflows
from workflows import Task, Workflow
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = __name__


def chatty(ctx: Any) -> None:
    ctx.progress(3, 3, "all done")
    ctx.summary({"rows": 3})
    for line in range(3):
        ctx.log(f"out {line}")
    ctx.log("warned", stream="stderr")


class Chatty(Workflow):
    name = "api_frames_chatty"
    work = Task(f"{HERE}.chatty")


@pytest.fixture
def run() -> Any:
    started = workflows.start_run(Chatty)
    run_pending()
    return started


def url(run: Any, step: str = "work") -> str:
    return f"/api/runs/{run.pk}/steps/{step}/frames/"


def test_frames_after_a_cursor_with_the_next_cursor_and_the_dropped_count(api, run):
    body = api("viewer").get(url(run)).json()
    assert [(f["seq"], f["stream"], f["text"], f["attempt"]) for f in body["frames"]] == [
        (1, "stdout", "out 0", 1),
        (2, "stdout", "out 1", 1),
        (3, "stdout", "out 2", 1),
        (4, "stderr", "warned", 1),
    ]
    assert all(frame["at"] for frame in body["frames"])
    assert (body["next_after"], body["dropped"]) == (4, 0)
    page = api("viewer").get(url(run), {"after": 1, "limit": 2}).json()
    assert [f["seq"] for f in page["frames"]] == [2, 3]
    assert page["next_after"] == 3
    empty = api("viewer").get(url(run), {"after": 4}).json()
    assert (empty["frames"], empty["next_after"]) == ([], 4)
    stderr = api("viewer").get(url(run), {"stream": "stderr"}).json()
    assert [f["text"] for f in stderr["frames"]] == ["warned"]


def test_the_step_may_be_named_by_its_id(api, run):
    step = run.steps.get(name="work")
    assert len(api("viewer").get(url(run, str(step.pk))).json()["frames"]) == 4


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"after": "x"}, "after"),
        ({"after": -1}, "after"),
        ({"after": 2**63}, "after"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": "1.5"}, "limit"),
        ({"stream": "stdin"}, "stream"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(api, run, query, field):
    response = api("viewer").get(url(run), query)
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]


@pytest.mark.parametrize("step", ["nope", "99999999", "wo%00rk"])
def test_an_unknown_step_is_a_404(api, run, step):
    response = api("viewer").get(url(run, step))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "step_not_found"


def test_an_unknown_run_is_a_404(api, run):
    response = api("viewer").get(
        "/api/runs/00000000-0000-0000-0000-000000000000/steps/work/frames/"
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "run_not_found"


@pytest.mark.parametrize(("role", "status"), [("anonymous", 401), ("nobody", 403)])
def test_reading_frames_needs_view_run(api, run, role, status):
    assert api(role).get(url(run)).status_code == status


def test_steps_carry_their_telemetry_in_the_run_and_the_step(api, run):
    detail = api("viewer").get(f"/api/runs/{run.pk}/").json()
    (step,) = detail["steps"]
    expected = {
        "progress_done": 3.0,
        "progress_total": 3.0,
        "progress_message": "all done",
        "summary": {"rows": 3},
        "summary_version": 1,
        "frames_written": 4,
        "frames_dropped": 0,
    }
    assert {name: step[name] for name in expected} == expected
    assert step["progress_at"]
    one = api("viewer").get(f"/api/steps/{step['id']}/").json()
    assert {name: one[name] for name in expected} == expected
    assert one["progress_at"]


def test_the_schema_documents_the_endpoint(api):
    schema = api("viewer").get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/runs/{id}/steps/{step}/frames/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"after", "limit", "stream"}
    assert {"200", "400", "404"} <= set(operation["responses"])
