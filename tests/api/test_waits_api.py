"""``GET /api/waits/``: every wait across runs, filtered and paged; viewers only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.api.test_api_basics import assert_error
from tests.support.handlers import ASK_BANK
from workflows import Gate, Task, WaitForSignal, Workflow
from workflows.models import Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

URL = "/api/waits/"


class Refund(Workflow):
    name = "api_waits_refund"
    approve = Gate(prompt="Refund {input[order]}?", timeout=timedelta(days=1), after=[])
    returned = WaitForSignal("returned", after=[])
    bank = Task(ASK_BANK, after=[])


@pytest.fixture
def refund() -> workflows.models.Run:
    run = workflows.start_run(Refund, {"order": "R-1"}, business_key="R-1")
    run_pending()
    return run


def test_a_viewer_lists_every_wait_with_its_run_age_and_timeout(api, refund):
    response = api("viewer").get(URL)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["next"], body["previous"]) == (None, None)
    waits = body["results"]
    assert [wait["kind"] for wait in waits] == ["gate", "signal", "callback"]
    gate = waits[0]
    step = Step.objects.get(run=refund, name="approve")
    assert {
        key: gate[key]
        for key in ("run", "workflow", "business_key", "run_status", "step", "step_id", "item")
    } == {
        "run": str(refund.pk),
        "workflow": "api_waits_refund",
        "business_key": "R-1",
        "run_status": "running",
        "step": "approve",
        "step_id": step.pk,
        "item": None,
    }
    assert gate["waits_for"] == "Refund R-1?"
    assert gate["age_seconds"] >= 0 and gate["due_at"] is not None and gate["since"]
    assert waits[1]["waits_for"] == "returned" and waits[1]["due_at"] is None
    assert waits[2]["details"] == {"attempt": 1}


def test_filters_and_pages(api, refund):
    client = api("viewer")
    kinds = client.get(URL, {"kind": ["gate", "callback"]}).json()["results"]
    assert [wait["kind"] for wait in kinds] == ["gate", "callback"]
    assert client.get(URL, {"workflow": "elsewhere"}).json()["results"] == []
    assert client.get(URL, {"older_than": "P1D"}).json()["results"] == []
    Step.objects.filter(run=refund, name="returned").update(
        started_at=timezone.now() - timedelta(days=2)
    )
    old = client.get(URL, {"older_than": str(86400)}).json()["results"]
    assert [wait["step"] for wait in old] == ["returned"]
    first = client.get(URL, {"page_size": 2}).json()
    assert len(first["results"]) == 2 and first["next"]
    second = client.get(first["next"]).json()
    assert [wait["step"] for wait in second["results"]] == ["bank"]
    assert second["next"] is None


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"kind": "nap"}, "kind"),
        ({"kind": "held"}, "kind"),  # the limits' old name: concurrency, rate, budget now
        ({"kind": "lease"}, "kind"),  # a hold explain tells, not a wait the list has
        ({"older_than": "soon"}, "older_than"),
        ({"older_than": "-P1D"}, "older_than"),
        ({"page_size": 0}, "page_size"),
        ({"page_size": 501}, "page_size"),
        ({"page_size": "ten"}, "page_size"),
        ({"workflow": "x" * 201}, "workflow"),
    ],
)
def test_a_filter_that_does_not_parse_is_a_400_naming_it(api, query, field):
    error = assert_error(api("viewer").get(URL, query), 400, "validation_error")
    assert field in error["details"]


def test_a_cursor_the_server_did_not_issue_is_a_404(api, refund):
    client = api("viewer")
    assert_error(client.get(URL, {"cursor": "cD1hYmM="}), 404, "not_found")
    issued = client.get(URL, {"page_size": 1}).json()["next"]
    assert client.get(issued).status_code == 200


@pytest.mark.parametrize(
    ("role", "status", "code"),
    [("anonymous", 401, "not_authenticated"), ("nobody", 403, "permission_denied")],
)
def test_only_viewers_may_list_waits(api, refund, role, status, code):
    assert_error(api(role).get(URL), status, code)


def test_the_schema_documents_the_list(api):
    schema = api("viewer").get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"][URL]["get"]
    names = {parameter["name"] for parameter in operation["parameters"]}
    assert names == {"kind", "workflow", "older_than", "page_size", "cursor"}
    assert {"200", "400", "401", "403", "404"} <= set(operation["responses"])
