"""Run tags over HTTP: ``tags`` when starting (a 400 naming the tag otherwise, nothing
written), ``tags`` in every run representation, and ``GET /api/runs/?tag=key:value``,
repeatable (every tag must match), a malformed one a 400 naming it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import workflows
from tests.support.handlers import WORK
from tests.support.workflows import Work
from workflows import Task, Workflow
from workflows.models import Event, Flow, Run, RunTag, Step

from .test_api_basics import assert_error
from .test_work_api import claimed, post, started, worker  # noqa: F401 - the fixture

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


# Flows: tags given when a flow is created and when a member is added.


def test_a_flow_created_with_tags_shows_them_and_its_members_inherit_them(api):
    created = api("starter").post(
        "/api/flows/", {"name": "nightly", "tags": {"customer": "acme"}}, format="json"
    )
    assert created.status_code == 201, created.content
    flow = created.json()
    assert flow["tags"] == {"customer": "acme"}
    add = f"/api/flows/{flow['id']}/members/"
    inherited = api("starter").post(add, {"workflow": Work.name, "member": "a"}, format="json")
    assert inherited.status_code == 201, inherited.content
    assert inherited.json()["tags"] == {"customer": "acme"}
    own = api("starter").post(
        add, {"workflow": Work.name, "member": "b", "tags": {"team": "ops"}}, format="json"
    )
    assert own.status_code == 201, own.content
    assert own.json()["tags"] == {"team": "ops"}
    assert RunTag.objects.filter(run_id=own.json()["id"]).count() == 1
    listed = api("viewer").get("/api/flows/").json()["results"]
    assert listed[0]["tags"] == {"customer": "acme"}
    assert api("viewer").get(f"/api/flows/{flow['id']}/").json()["tags"] == {"customer": "acme"}


@pytest.mark.parametrize(
    ("tags", "problem"),
    [
        ({"Customer": "acme"}, "tag key 'Customer' must match"),
        ({"customer": 1}, "tag 'customer' must be a string"),
        ({f"k{n}": "v" for n in range(33)}, "at most 32"),
    ],
)
def test_a_flow_or_member_with_bad_tags_is_a_400_naming_the_tag_and_writes_nothing(
    api, tags, problem
):
    error = assert_error(
        api("starter").post("/api/flows/", {"name": "n", "tags": tags}, format="json"),
        400,
        "invalid_input",
    )
    assert problem in error["message"] and error["details"]["field"] == "tags"
    assert not Flow.objects.exists()
    flow = workflows.create_flow("n")
    error = assert_error(
        api("starter").post(
            f"/api/flows/{flow.pk}/members/",
            {"workflow": Work.name, "member": "a", "tags": tags},
            format="json",
        ),
        400,
        "invalid_input",
    )
    assert problem in error["message"] and error["details"]["field"] == "tags"
    assert not Run.objects.exists()


# External workers: a completion may carry a patch of the run's tags.


def test_an_external_worker_completes_with_a_patch_of_the_tags(worker):  # noqa: F811
    run = started(tags={"customer": "acme", "draft": "yes"})
    job = claimed(worker)
    body = {"lease": job["lease"], "output": 2, "tags": {"printer": "p-7", "draft": None}}
    done = post(worker, "complete", body)
    assert done.status_code == 200, done.content
    run.refresh_from_db()
    assert run.tags == {"customer": "acme", "printer": "p-7"}
    assert dict(RunTag.objects.filter(run=run).values_list("key", "value")) == run.tags
    write = Event.objects.filter(run=run, type="run.tags_set").latest("id").payload
    assert (write["step"], write["attempt"], write["patches"]) == (
        "print_labels",
        1,
        [{"printer": "p-7", "draft": None}],
    )
    assert [row["id"] for row in workflows.list_runs(tags={"printer": "p-7"})] == [str(run.pk)]


@pytest.mark.parametrize(
    ("patch", "problem"),
    [
        ({"Printer": "p-7"}, "tag key 'Printer' must match"),
        ({"printer": 7}, "tag 'printer' must be a string"),
        (["printer"], "tags must be a dict"),
        ({f"k{n}": "v" for n in range(32)}, "33 tags; a run has at most 32"),
    ],
)
def test_an_external_workers_bad_tags_are_a_400_and_write_nothing(
    worker,  # noqa: F811
    patch: Any,
    problem: str,
):
    run = started(tags={"customer": "acme"})
    job = claimed(worker)
    response = post(worker, "complete", {"lease": job["lease"], "output": 1, "tags": patch})
    error = assert_error(response, 400, "invalid_input")
    assert problem in error["message"]
    assert error["details"]["field"] == "tags"
    step = Step.objects.get(run=run)
    assert (step.status, step.output) == ("running", None)  # still the worker's
    run.refresh_from_db()
    assert run.tags == {"customer": "acme"}
    assert RunTag.objects.filter(run=run).count() == 1
    again = post(worker, "complete", {"lease": job["lease"], "output": 1})
    assert again.status_code == 200, again.content


def test_a_stale_workers_tags_are_refused_with_its_completion(worker):  # noqa: F811
    run = started(tags={"customer": "acme"})
    job = claimed(worker)
    workflows.revoke_lease(Step.objects.get(run=run), expected_attempt=1, reason="wedged")
    response = post(worker, "complete", {"lease": job["lease"], "output": 1, "tags": {"x": "y"}})
    assert_error(response, 409, "lease_lost")
    run.refresh_from_db()
    assert run.tags == {"customer": "acme"}
    assert workflows.list_runs(tags={"x": "y"}) == []


def test_the_schema_documents_the_flows_and_completions_tags(api):
    schema = api("viewer").get("/api/schema/?format=json").json()["components"]["schemas"]
    assert schema["CreateFlowRequest"]["properties"]["tags"]["maxProperties"] == 32
    assert "tags" in schema["AddMemberRequest"]["properties"]
    assert "tags" in schema["FlowDetail"]["properties"]
    assert "tags" in schema["Flow"]["properties"]
    patch = schema["WorkCompleteRequest"]["properties"]["tags"]
    assert patch["additionalProperties"]["nullable"] is True
