"""``POST /budgets/`` creates or changes a budget without a deploy, ``POST
/budgets/report/`` records usage made outside any step: both need operate_run, their
bodies are strict and every refusal names its field, and the counters show breaches."""

from __future__ import annotations

import pytest

from tests.support.handlers import NOOP
from workflows import Task, Workflow
from workflows.definitions import Budget
from workflows.models import BudgetCounter, RuntimeBudget, UsageReport

pytestmark = pytest.mark.django_db


class Metered(Workflow):
    name = "api_runtime_budget_metered"
    budgets = [Budget("tokens", 100)]
    call = Task(NOOP)


CREATE = {
    "workflow": Metered.name,
    "dimension": "usd",
    "limit": "25",
    "per": "business_key",
    "period_seconds": 86400,
    "on_exhausted": "fail",
}


def test_operators_create_then_change_a_budget(api):
    made = api("operator").post("/api/budgets/", CREATE, format="json")
    assert made.status_code == 201
    assert made.json() == {
        **CREATE,
        "limit": "25.000000",
        "created": True,
        "version": 1,
        "counters": 0,
        "released": 0,
    }
    changed = api("operator").post("/api/budgets/", {**CREATE, "limit": 30}, format="json")
    assert changed.status_code == 200
    assert (changed.json()["created"], changed.json()["version"]) == (False, 2)
    rule = RuntimeBudget.objects.get()
    assert (rule.limit, rule.changed_by) == (30, "operator-user")
    # The declared one is replaced by a budget set at run time of the same name.
    replaced = api("operator").post(
        "/api/budgets/",
        {"workflow": Metered.name, "dimension": "tokens", "limit": 5},
        format="json",
    )
    assert (replaced.status_code, replaced.json()["per"]) == (201, "workflow")


def test_operators_report_usage_and_see_the_breach(api):
    body = {"workflow": Metered.name, "dimension": "tokens", "amount": 100}
    reported = api("operator").post("/api/budgets/report/", body, format="json")
    assert reported.status_code == 200
    (counter,) = reported.json()["counters"]
    assert (counter["used"], counter["exhausted"], counter["breaches"]) == (
        "100.000000",
        True,
        1,
    )
    assert counter["last_breached_at"] is not None and counter["origin"] == "code"
    listed = api("viewer").get("/api/budgets/").json()["results"]
    assert [row["breaches"] for row in listed] == [1]
    assert UsageReport.objects.get().reported_by == "operator-user"


def test_viewers_may_not_create_or_report(api):
    refused = api("viewer").post("/api/budgets/", CREATE, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "permission_denied")
    body = {"workflow": Metered.name, "dimension": "tokens", "amount": 1}
    assert api("viewer").post("/api/budgets/report/", body, format="json").status_code == 403
    assert api("anonymous").post("/api/budgets/", CREATE, format="json").status_code == 401
    assert not RuntimeBudget.objects.exists() and not UsageReport.objects.exists()


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"workflow": None}, "workflow", "This field may not be null."),
        ({"dimension": "x" * 61}, "dimension", "Ensure this field has no more than 60"),
        ({"limit": -1}, "limit", "Ensure this value is greater than or equal to 0."),
        ({"limit": "lots"}, "limit", "A valid number is required."),
        ({"per": "customer"}, "per", '"customer" is not a valid choice.'),
        ({"period_seconds": 0}, "period_seconds", "Ensure this value is greater than or equal"),
        ({"on_exhausted": "queue"}, "on_exhausted", '"queue" is not a valid choice.'),
        ({"limt": 5}, "limt", "this field is not accepted here"),
    ],
)
def test_malformed_create_bodies_are_400s_naming_the_field(api, change, field, message):
    refused = api("operator").post("/api/budgets/", {**CREATE, **change}, format="json")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "validation_error"
    assert error["details"][field][0].startswith(message)
    assert not RuntimeBudget.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [({"workflow": "no_such_workflow"}, "workflow"), ({"dimension": "two words"}, "dimension")],
)
def test_creating_what_the_service_refuses_is_invalid_input_naming_the_field(api, change, field):
    refused = api("operator").post("/api/budgets/", {**CREATE, **change}, format="json")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["details"]["field"]) == ("invalid_input", field)


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"dimension": "tokens", "amount": 1}, 400, "workflow"),
        ({"workflow": Metered.name, "dimension": "usd", "amount": 1}, 400, "dimension"),
        ({"workflow": Metered.name, "dimension": "tokens", "amount": -1}, 400, "amount"),
        (
            {"workflow": Metered.name, "dimension": "tokens", "amount": 1, "scope_key": "k" * 256},
            400,
            "scope_key",
        ),
    ],
)
def test_refused_reports_name_the_field_and_record_nothing(api, body, status, field):
    refused = api("operator").post("/api/budgets/report/", body, format="json")
    assert refused.status_code == status
    error = refused.json()["error"]
    assert field in error["details"] or error["details"].get("field") == field
    assert not UsageReport.objects.exists() and not BudgetCounter.objects.exists()


def test_the_schema_documents_create_and_report_with_examples(api):
    schema = api("viewer").get("/api/schema/", HTTP_ACCEPT="application/json").json()
    create = schema["paths"]["/api/budgets/"]["post"]
    assert set(create["responses"]) >= {"200", "201", "400", "403"}
    assert create["requestBody"]["content"]["application/json"]["examples"]
    report = schema["paths"]["/api/budgets/report/"]["post"]
    assert report["requestBody"]["content"]["application/json"]["examples"]
