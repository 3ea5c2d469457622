"""Run tags over HTTP: ``tags`` when starting (a 400 naming the tag otherwise, nothing
written), ``tags`` in every run representation, and ``GET /api/runs/?tag=key:value``,
repeatable (every tag must match), a malformed one a 400 naming it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import workflows
from tests.support.handlers import WORK
from workflows import Task, Workflow
from workflows.models import Run, RunTag

from .test_api_basics import assert_error

pytestmark = pytest.mark.django_db


class Tagged(Workflow):
    name = "api_tags_tagged"
    note = Task(WORK)


def start(api: Any, **body: Any) -> Any:
    return api("starter").post("/api/runs/", {"workflow": Tagged.name, **body}, format="json")


def ids(response: Any) -> set[str]:
    assert response.status_code == 200, response.content
    return {run["id"] for run in response.json()["results"]}


def test_a_start_with_tags_tags_the_run_and_every_representation_shows_them(api):
    response = start(api, tags={"customer": "acme", "region": "eu"})
    assert response.status_code == 201, response.content
    assert response.json()["tags"] == {"customer": "acme", "region": "eu"}
    run = Run.objects.get()
    assert dict(RunTag.objects.filter(run=run).values_list("key", "value")) == {
        "customer": "acme",
        "region": "eu",
    }
    assert api("viewer").get(f"/api/runs/{run.pk}/").json()["tags"] == run.tags
    listed = api("viewer").get("/api/runs/").json()["results"]
    assert listed[0]["tags"] == {"customer": "acme", "region": "eu"}


@pytest.mark.parametrize(
    ("tags", "problem"),
    [
        ({"Customer": "acme"}, "tag key 'Customer' must match"),
        ({"customer": 1}, "tag 'customer' must be a string"),
        ({"customer": "x" * 256}, "the limit is 255"),
        ({"customer": "a\u0000b"}, "NUL"),
        ({f"k{n}": "v" for n in range(33)}, "at most 32"),
        (["customer"], "tags must be a dict"),
    ],
)
def test_bad_tags_at_start_are_a_400_naming_the_tag_and_nothing_is_written(api, tags, problem):
    error = assert_error(start(api, tags=tags), 400, "invalid_input")
    assert problem in error["message"]
    assert error["details"]["field"] == "tags"
    assert not Run.objects.exists()


def test_the_runs_list_filters_by_two_tags_every_one_matching(api):
    both = workflows.start_run(Tagged, tags={"customer": "acme", "region": "eu"})
    acme_us = workflows.start_run(Tagged, tags={"customer": "acme", "region": "us"})
    workflows.start_run(Tagged, tags={"customer": "globex", "region": "eu"})
    workflows.start_run(Tagged)
    viewer = api("viewer")
    assert ids(viewer.get("/api/runs/?tag=customer:acme&tag=region:eu")) == {str(both.pk)}
    assert ids(viewer.get("/api/runs/?tag=customer:acme")) == {str(both.pk), str(acme_us.pk)}
    assert ids(viewer.get("/api/runs/?tag=customer:acme&status=running")) == {
        str(both.pk),
        str(acme_us.pk),
    }
    assert ids(viewer.get("/api/runs/?tag=customer:initech")) == set()


def test_a_tag_value_may_hold_a_colon(api):
    run = workflows.start_run(Tagged, tags={"url": "https://example.com"})
    assert ids(api("viewer").get("/api/runs/?tag=url:https://example.com")) == {str(run.pk)}


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("tag=customer", "'customer' must be key:value"),
        ("tag=Customer:acme", "tag key 'Customer' must match"),
        ("tag=:acme", "tag key '' must match"),
        (f"tag=customer:{'x' * 256}", "the limit is 255"),
        ("tag=region:eu&tag=customer%00:x", "customer\\x00"),
        ("tag=region:eu&tag=region:us", "'region' is given twice"),
    ],
)
def test_a_malformed_tag_is_a_400_naming_it(api, query, named):
    response = api("viewer").get(f"/api/runs/?{query}")
    assert response.status_code == 400, response.content
    body = response.json()["error"]
    assert "tag" in body["details"], body
    assert named in " ".join(body["details"]["tag"]), body


def test_the_schema_documents_tag_as_a_repeatable_query_parameter(api):
    schema = api("viewer").get("/api/schema/?format=json").json()
    parameters = schema["paths"]["/api/runs/"]["get"]["parameters"]
    tag = next(parameter for parameter in parameters if parameter["name"] == "tag")
    assert tag["in"] == "query"
    assert tag["explode"] is True
    assert tag["schema"]["type"] == "array"
    assert tag["schema"]["items"]["example"] == "customer:acme"
    assert "customer:acme" in tag["description"]
    run = schema["components"]["schemas"]["Run"]["properties"]
    assert run["tags"]["type"] == "object"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.text(max_size=80), max_size=3))
def test_any_tag_values_are_a_200_or_a_400_naming_tag(api, values):
    """The fixture's clients are read-only here: sharing them across examples is safe."""
    response = api("viewer").get("/api/runs/", {"tag": values})
    assert response.status_code in (200, 400), response.content
    if response.status_code == 400:
        assert "tag" in response.json()["error"]["details"]
