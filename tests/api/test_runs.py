"""Runs over HTTP: start (idempotent), list with filters and cursor pages, inspect a run,
its history, its steps and their items; who may do which; bodies that must be refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from workflows import FanOut, Gate, InvalidInput, PermanentError, Retry, Task, Workflow
from workflows.models import Event, Run
from workflows.testing import run_pending

from .test_api_basics import assert_error

pytestmark = pytest.mark.django_db

HERE = "tests.api.test_runs"


def refuse(ctx: object) -> None:
    raise PermanentError("card declined")


def square(ctx) -> int:
    if ctx.item == 3:
        raise PermanentError("three is unlucky")
    return ctx.item * ctx.item


class Simple(Workflow):
    name = "api_runs_simple"
    first = Task(NOOP)
    second = Task(NOOP, after=["first"])

    @classmethod
    def clean_input(cls, data: dict) -> dict:
        if "amount" in data and not isinstance(data["amount"], int):
            raise InvalidInput("amount must be a whole number")
        return data


class Declined(Workflow):
    name = "api_runs_declined"
    charge = Task(f"{HERE}.refuse", retry=Retry(max_attempts=1))


class Approval(Workflow):
    name = "api_runs_approval"
    approve = Gate(prompt="ship it?")


class Squares(Workflow):
    name = "api_runs_squares"
    squares = FanOut(
        f"{HERE}.square",
        items=lambda ctx: [1, 2, 3, 4],
        retry=Retry(max_attempts=1),
        tolerated_failures=1,
    )


def start(api, body: dict, key: str | None = None, role: str = "starter"):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return api(role).post("/api/runs/", body, format="json", **headers)


# Starting runs.


def test_a_run_is_started_with_201_and_described(api):
    response = start(
        api, {"workflow": "api_runs_simple", "input": {"amount": 5}, "business_key": "B-1"}
    )
    assert response.status_code == 201, response.content
    run = response.json()
    assert run["workflow"] == "api_runs_simple" and run["workflow_version"] == 1
    assert run["input"] == {"amount": 5} and run["business_key"] == "B-1"
    assert [step["name"] for step in run["steps"]] == ["first", "second"]
    assert Run.objects.get(pk=run["id"]).created_by.username == "starter-user"


def test_the_same_key_and_input_return_the_same_run_with_200(api):
    first = start(api, {"workflow": "api_runs_simple", "input": {"amount": 1}}, key="order-1")
    again = start(api, {"workflow": "api_runs_simple", "input": {"amount": 1}}, key="order-1")
    in_body = start(
        api, {"workflow": "api_runs_simple", "input": {"amount": 1}, "idempotency_key": "order-1"}
    )
    assert (first.status_code, again.status_code, in_body.status_code) == (201, 200, 200)
    assert first.json()["id"] == again.json()["id"] == in_body.json()["id"]
    assert Run.objects.count() == 1


def test_the_same_key_with_another_input_is_a_409(api):
    start(api, {"workflow": "api_runs_simple", "input": {"amount": 1}}, key="order-2")
    response = start(api, {"workflow": "api_runs_simple", "input": {"amount": 2}}, key="order-2")
    error = assert_error(response, 409, "idempotency_conflict")
    assert error["details"]["idempotency_key"] == "order-2"


def test_a_header_and_a_body_key_that_differ_are_refused(api):
    body = {"workflow": "api_runs_simple", "idempotency_key": "a"}
    error = assert_error(start(api, body, key="b"), 400, "validation_error")
    assert "idempotency_key" in error["details"]
    assert Run.objects.count() == 0


def test_an_unknown_workflow_is_a_404(api):
    error = assert_error(start(api, {"workflow": "nope"}), 404, "workflow_not_found")
    assert "nope" in error["message"]


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"input": {}}, {"workflow"}),
        ({"workflow": "api_runs_simple", "inptu": {}}, {"inptu"}),
        ({"workflow": 7}, {"workflow"}),
        ({"workflow": "api_runs_simple", "business_key": ["B"]}, {"business_key"}),
        ({"workflow": "api_runs_simple", "business_key": "x" * 256}, {"business_key"}),
        ({"workflow": "api_runs_simple", "idempotency_key": ""}, {"idempotency_key"}),
        ({"workflow": "api_runs_simple", "business_key": "a\x00b"}, {"business_key"}),
        ({"workflow": "api_runs_simple", "input": None}, {"input"}),
    ],
)
def test_a_bad_start_body_is_a_400_naming_the_fields(api, body, fields):
    error = assert_error(start(api, body), 400, "validation_error")
    assert set(error["details"]) == fields
    assert Run.objects.count() == 0


@pytest.mark.parametrize("data", [[1, 2], "text", 5, None])
def test_a_body_that_is_not_an_object_is_a_400(api, data):
    response = api("starter").post("/api/runs/", data, format="json")
    assert_error(response, 400, "validation_error")


def test_input_the_workflow_refuses_is_invalid_input(api):
    response = start(api, {"workflow": "api_runs_simple", "input": {"amount": "many"}})
    assert "whole number" in assert_error(response, 400, "invalid_input")["message"]
    not_an_object = start(api, {"workflow": "api_runs_simple", "input": [1]})
    assert_error(not_an_object, 400, "invalid_input")


def test_malformed_json_is_a_400_malformed_request(api):
    response = api("starter").post("/api/runs/", '{"workflow": ', content_type="application/json")
    assert_error(response, 400, "malformed_request")


def test_a_body_over_the_limit_is_a_413(api):
    with override_settings(WORKFLOWS={"EXECUTOR": "inline", "API_MAX_BODY_BYTES": 64}):
        response = start(api, {"workflow": "api_runs_simple", "input": {"pad": "x" * 100}})
    error = assert_error(response, 413, "payload_too_large")
    assert error["details"] == {"limit": 64}
    assert Run.objects.count() == 0


# Reading runs.


def test_a_run_shows_its_steps_what_it_waits_on_and_what_may_be_done(api):
    run = workflows.start_run(Approval)
    body = api("viewer").get(f"/api/runs/{run.pk}/").json()
    assert body["id"] == str(run.pk) and body["status"] == "waiting"
    assert body["version"] >= 1 and body["attention"] == "ok"
    (gate,) = body["waiting_on"]
    assert gate["kind"] == "gate" and gate["step"] == "approve"
    assert gate["details"]["prompt"] == "ship it?"
    actions = {(action["verb"], action["step"]): action for action in body["allowed_actions"]}
    assert actions[("cancel", None)]["allowed"] is True
    assert actions[("resume", None)]["allowed"] is False
    assert "paused" in actions[("resume", None)]["reason"]
    assert body["steps"][0]["name"] == "approve" and body["steps"][0]["status"] == "waiting"


@pytest.mark.parametrize("run_id", ["not-a-uuid", "53f60079-b58b-4e84-a78a-6b66e6b3d196", "1.5"])
def test_an_unknown_or_malformed_run_id_is_a_404(api, run_id):
    assert_error(api("viewer").get(f"/api/runs/{run_id}/"), 404, "run_not_found")
    assert_error(api("viewer").get(f"/api/runs/{run_id}/events/"), 404, "run_not_found")


def make_runs() -> dict[str, Run]:
    done = workflows.start_run(Simple, business_key="B-7")
    failed = workflows.start_run(Declined)
    waiting = workflows.start_run(Approval)
    run_pending()
    return {"done": done, "failed": failed, "waiting": waiting}


def listed(api, query: str = "") -> list[str]:
    response = api("viewer").get(f"/api/runs/{query}")
    assert response.status_code == 200, response.content
    return [run["id"] for run in response.json()["results"]]


def test_runs_are_listed_newest_first_and_filtered(api):
    runs = make_runs()
    ids = {name: str(run.pk) for name, run in runs.items()}
    assert listed(api) == [ids["waiting"], ids["failed"], ids["done"]]
    assert listed(api, "?status=failed") == [ids["failed"]]
    assert listed(api, "?status=failed&status=completed") == [ids["failed"], ids["done"]]
    assert listed(api, "?workflow=api_runs_approval") == [ids["waiting"]]
    assert listed(api, "?business_key=B-7") == [ids["done"]]
    assert listed(api, "?attention=failed") == [ids["failed"]]
    assert listed(api, "?attention=ok") == [ids["waiting"], ids["done"]]
    waiting_created = runs["waiting"].created_at.isoformat().replace("+00:00", "Z")
    assert listed(api, f"?created_after={waiting_created}") == [ids["waiting"]]
    assert listed(api, f"?created_before={waiting_created}") == [ids["failed"], ids["done"]]
    row = api("viewer").get("/api/runs/?status=completed").json()["results"][0]
    assert set(row) == {
        "id",
        "title",
        "trigger",
        "dismissed_at",
        "workflow",
        "workflow_version",
        "status",
        "business_key",
        "tags",
        "subject",
        "parent_run",
        "created_at",
        "updated_at",
        "started_at",
        "finished_at",
        "deadline",
        "schedule",
        "scheduled_for",
    }
    assert (row["schedule"], row["scheduled_for"]) == (None, None)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=nope", "status"),
        ("attention=bored", "attention"),
        ("created_after=yesterday", "created_after"),
        ("created_before=2024-13-01T00:00:00Z", "created_before"),
    ],
)
def test_a_bad_filter_value_is_a_400_naming_it(api, query, field):
    error = assert_error(api("viewer").get(f"/api/runs/?{query}"), 400, "validation_error")
    assert field in error["details"]


def test_cursor_pages_cover_every_run_once(api):
    started = [workflows.start_run(Approval) for _ in range(5)]
    Run.objects.filter(pk__in=[run.pk for run in started]).update(created_at=timezone.now())
    seen: list[str] = []
    url = "/api/runs/?page_size=2"
    while url:
        page = api("viewer").get(url).json()
        assert len(page["results"]) <= 2
        seen += [run["id"] for run in page["results"]]
        url = page["next"]
    assert sorted(seen) == sorted(str(run.pk) for run in started)
    assert len(seen) == len(set(seen)) == 5


def test_events_are_in_sequence_and_resume_after_a_seq(api):
    run = workflows.start_run(Simple)
    run_pending()
    everything = api("viewer").get(f"/api/runs/{run.pk}/events/").json()["results"]
    assert [event["seq"] for event in everything] == list(
        Event.objects.filter(run=run).order_by("id").values_list("id", flat=True)
    )
    assert everything[0]["type"] == "run.started" and everything[0]["step"] is None
    assert {"seq", "type", "step", "payload", "created_at"} == set(everything[0])
    assert "first" in {event["step"] for event in everything}
    after = everything[1]["seq"]
    rest = api("viewer").get(f"/api/runs/{run.pk}/events/?after_seq={after}").json()
    assert [event["seq"] for event in rest["results"]] == [e["seq"] for e in everything[2:]]
    paged = api("viewer").get(f"/api/runs/{run.pk}/events/?after_seq={after}&page_size=1").json()
    assert [event["seq"] for event in paged["results"]] == [everything[2]["seq"]]
    following = api("viewer").get(paged["next"]).json()
    assert [event["seq"] for event in following["results"]] == [everything[3]["seq"]]


@pytest.mark.parametrize("after_seq", ["-1", "1.5", "x"])
def test_a_bad_after_seq_is_a_400(api, after_seq):
    run = workflows.start_run(Simple)
    response = api("viewer").get(f"/api/runs/{run.pk}/events/?after_seq={after_seq}")
    assert "after_seq" in assert_error(response, 400, "validation_error")["details"]


# Steps and items.


def test_a_step_shows_its_attempts_gate_fields_and_counters(api):
    run = workflows.start_run(Approval)
    gate = run.steps.get(name="approve")
    body = api("viewer").get(f"/api/steps/{gate.pk}/").json()
    assert body["id"] == gate.pk and body["run"] == str(run.pk)
    assert body["status"] == "waiting" and body["kind"] == "gate"
    assert body["prompt"] == "ship it?" and body["decided_by"] is None
    assert body["generation"] == 0 and body["items_total"] == 0


def test_an_undecided_gate_step_has_a_null_decision_as_the_schema_says(api, sample):
    body = api("viewer").get(f"/api/steps/{sample.gate.pk}/").json()
    assert body["decision"] is None
    schema = api("viewer").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    components = schema.json()["components"]["schemas"]
    decision = components["Step"]["properties"]["decision"]
    assert decision["nullable"] is True
    enums = [components[ref["$ref"].rsplit("/", 1)[1]]["enum"] for ref in decision["oneOf"]]
    assert enums == [["approved", "rejected"], [None]]
    decided = api("viewer").post(f"/api/gates/{sample.gate.pk}/approve/", {}, format="json")
    assert decided.status_code == 200, decided.content
    assert api("viewer").get(f"/api/steps/{sample.gate.pk}/").json()["decision"] == "approved"


def test_a_fan_out_step_lists_its_items_by_status(api):
    run = workflows.start_run(Squares)
    run_pending()
    step = run.steps.get(name="squares")
    body = api("viewer").get(f"/api/steps/{step.pk}/").json()
    assert (body["items_total"], body["items_completed"], body["items_failed"]) == (4, 3, 1)
    items = api("viewer").get(f"/api/steps/{step.pk}/items/").json()["results"]
    assert [item["item"] for item in items] == [1, 2, 3, 4]
    assert items[1]["output"] == 4
    failed = api("viewer").get(f"/api/steps/{step.pk}/items/?status=failed").json()["results"]
    assert [item["item"] for item in failed] == [3] and failed[0]["error"]
    first = api("viewer").get(f"/api/steps/{step.pk}/items/?page_size=3").json()
    rest = api("viewer").get(first["next"]).json()
    assert [item["index"] for item in first["results"] + rest["results"]] == [0, 1, 2, 3]
    bad = api("viewer").get(f"/api/steps/{step.pk}/items/?status=lost")
    assert "status" in assert_error(bad, 400, "validation_error")["details"]


@pytest.mark.parametrize("step_id", ["x", "999999", "99999999999999999999999"])
def test_an_unknown_or_malformed_step_id_is_a_404(api, step_id):
    assert_error(api("viewer").get(f"/api/steps/{step_id}/"), 404, "step_not_found")
    assert_error(api("viewer").get(f"/api/steps/{step_id}/items/"), 404, "step_not_found")


# Who may do what.

READS = ["/api/runs/", "/api/runs/{run}/", "/api/runs/{run}/events/", "/api/steps/{step}/"]


@pytest.mark.parametrize(
    ("role", "status"),
    [("anonymous", 401), ("nobody", 403), ("viewer", 200), ("starter", 200), ("operator", 200)],
)
def test_reading_runs_needs_the_view_permission(api, role, status):
    run = workflows.start_run(Approval)
    step = run.steps.get()
    for url in READS:
        response = api(role).get(url.format(run=run.pk, step=step.pk))
        assert response.status_code == status, (url, response.content)


@pytest.mark.parametrize(
    ("role", "status"),
    [("anonymous", 401), ("nobody", 403), ("viewer", 403), ("starter", 201), ("operator", 403)],
)
def test_starting_runs_needs_the_start_permission(api, role, status):
    response = start(api, {"workflow": "api_runs_simple"}, role=role)
    assert response.status_code == status, response.content
    assert Run.objects.count() == (1 if status == 201 else 0)


def test_a_session_authenticates_too(client, django_user_model):
    from tests.api.conftest import user_with

    user_with("session-viewer", ["view_run"])
    client.login(username="session-viewer", password="pw")
    assert client.get("/api/runs/").status_code == 200


def test_the_schema_documents_run_bodies_and_errors(api):
    schema = api("viewer").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    paths = schema.json()["paths"]
    for path in (
        "/api/runs/",
        "/api/runs/{id}/",
        "/api/runs/{id}/events/",
        "/api/runs/{id}/cancel/",
        "/api/runs/{id}/signals/",
        "/api/runs/bulk/{verb}/",
        "/api/steps/{id}/",
        "/api/steps/{id}/items/",
        "/api/steps/{id}/skip/",
    ):
        assert path in paths, path
    create = paths["/api/runs/"]["post"]
    assert {"201", "200", "400", "409", "413"} <= set(create["responses"])
    assert "Idempotency-Key" in {parameter["name"] for parameter in create["parameters"]}
    listing = {parameter["name"] for parameter in paths["/api/runs/"]["get"]["parameters"]}
    assert {"200", "400", "401", "403", "404"} <= set(paths["/api/runs/"]["get"]["responses"])
    page = paths["/api/runs/"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert page["$ref"].endswith("/PaginatedRunList")
    assert {"status", "workflow", "attention", "created_after", "cursor"} <= listing
    components = schema.json()["components"]["schemas"]
    assert "Error" in components and "RunDetail" in components


def test_time_filters_accept_an_offset(api):
    run = workflows.start_run(Approval)
    since = (run.created_at - timedelta(hours=1)).astimezone(timezone.get_fixed_timezone(120))
    assert listed(api, "?created_after=" + since.isoformat().replace("+", "%2B")) == [str(run.pk)]
