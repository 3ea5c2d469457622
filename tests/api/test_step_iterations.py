"""``GET /api/runs/{id}/steps/{name}/iterations/``, the ``iteration`` of every serialized
step, and :func:`workflows.queries.iterations.step_iterations` behind them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support.loop_review import review_in_round
from workflows.errors import RunNotFound, StepNotFound
from workflows.models import Run
from workflows.queries.iterations import step_iterations

pytestmark = pytest.mark.django_db


@pytest.fixture
def run() -> Run:
    return review_in_round(3, User.objects.create_user("reviewer"))


def url(run: Run | str, step: str) -> str:
    return f"/api/runs/{getattr(run, 'pk', run)}/steps/{step}/iterations/"


def test_every_iteration_oldest_first_with_each_rounds_decision(run):
    found = step_iterations(run.pk, "review")
    assert [(i.iteration, i.status, i.decision, i.current) for i in found] == [
        (1, "completed", "rejected", False),
        (2, "completed", "rejected", False),
        (3, "waiting", "", True),
    ]
    assert [(i.decided_by, i.feedback) for i in found[:2]] == [
        ("reviewer", "not yet (1)"),
        ("reviewer", "not yet (2)"),
    ]
    assert found[0].generation < found[1].generation < found[2].generation
    drafts = step_iterations(run, "draft")
    assert [i.output for i in drafts] == [{"text": f"draft {n}"} for n in (1, 2, 3)]


def test_step_iterations_reads_in_three_queries_however_many_rounds(run):
    with CaptureQueriesContext(connection) as queries:
        step_iterations(str(run.pk), "review")
    assert len(queries) == 3
    with CaptureQueriesContext(connection) as queries:
        step_iterations(run, "draft")
    assert len(queries) == 2


def test_an_unknown_run_or_step_is_the_projects_not_found(run):
    with pytest.raises(RunNotFound):
        step_iterations("00000000-0000-0000-0000-000000000000", "review")
    with pytest.raises(StepNotFound, match="has no step 'nope'"):
        step_iterations(run, "nope")


def test_the_endpoint_pages_the_iterations_with_the_current_one_last(api, run):
    body = api("viewer").get(url(run, "review")).json()
    assert [(i["iteration"], i["decision"], i["current"]) for i in body["results"]] == [
        (1, "rejected", False),
        (2, "rejected", False),
        (3, "", True),
    ]
    first = body["results"][0]
    assert (first["decided_by"], first["feedback"], first["status"]) == (
        "reviewer",
        "not yet (1)",
        "completed",
    )
    assert body["next"] is None
    page = api("viewer").get(url(run, "review"), {"page_size": 1}).json()
    assert [i["iteration"] for i in page["results"]] == [1]
    rest = api("viewer").get(page["next"]).json()
    assert [i["iteration"] for i in rest["results"]] == [2, 3]
    assert [i["current"] for i in rest["results"]] == [False, True]


def test_a_step_no_loop_ran_again_has_its_one_iteration(api, run):
    body = api("viewer").get(url(run, "publish")).json()
    assert [(i["iteration"], i["status"], i["current"]) for i in body["results"]] == [
        (1, "pending", True)
    ]


def test_every_serialized_step_carries_its_iteration(api, run):
    detail = api("viewer").get(f"/api/runs/{run.pk}/").json()
    assert {s["name"]: s["iteration"] for s in detail["steps"]} == {
        "draft": 3,
        "review": 3,
        "again": 3,
        "publish": 1,
    }
    review = next(s for s in detail["steps"] if s["name"] == "review")
    assert api("viewer").get(f"/api/steps/{review['id']}/").json()["iteration"] == 3


@pytest.mark.parametrize("step", ["nope", "review%00", "1"])
def test_an_unknown_step_is_a_404_naming_it(api, run, step):
    response = api("viewer").get(url(run, step))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "step_not_found"
    assert "has no step" in response.json()["error"]["message"]


def test_an_unknown_run_is_a_404(api):
    response = api("viewer").get(url("00000000-0000-0000-0000-000000000000", "review"))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "run_not_found"


@pytest.mark.parametrize(("role", "status"), [("anonymous", 401), ("nobody", 403)])
def test_reading_needs_the_view_permission(api, run, role, status):
    assert api(role).get(url(run, "review")).status_code == status


def test_a_bad_page_size_or_cursor_is_refused(api, run):
    assert api("viewer").get(url(run, "review"), {"page_size": 0}).status_code == 400
    assert api("viewer").get(url(run, "review"), {"cursor": "made-up"}).status_code == 404


def test_the_schema_documents_the_endpoint(api):
    schema = api("viewer").get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/runs/{id}/steps/{step}/iterations/"]["get"]
    assert {"200", "400", "401", "403", "404"} <= set(operation["responses"])
    assert {p["name"] for p in operation["parameters"]} >= {"cursor", "page_size"}
