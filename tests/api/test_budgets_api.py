"""``/budgets/``: listing needs view_run, raising and resetting operate_run; bodies are
strict and every refusal names the field."""

from __future__ import annotations

from decimal import Decimal

import pytest

import workflows
from tests.support.handlers import NOOP
from workflows import Task, Workflow
from workflows.definitions import Budget
from workflows.engine.limits.budgets import record_usage
from workflows.models import BudgetCounter, Step

pytestmark = pytest.mark.django_db


class Priced(Workflow):
    name = "api_budget_priced"
    budgets = [Budget("tokens", 100), Budget("tokens", 10, per="business_key")]
    call = Task(NOOP)


@pytest.fixture
def counter() -> BudgetCounter:
    run = workflows.start_run(Priced, business_key="acme")
    record_usage(run.pk, None, 1, Priced, "tokens", 10)
    Step.objects.filter(run=run).update(held_on="budget:tokens")
    return BudgetCounter.objects.get(scope_key="acme")


def test_viewers_list_and_read_budgets(api, counter):
    listed = api("viewer").get("/api/budgets/")
    assert listed.status_code == 200
    rows = {row["scope_key"]: row for row in listed.json()["results"]}
    assert rows["acme"] == {
        **rows["acme"],
        "workflow": "api_budget_priced",
        "dimension": "tokens",
        "per": "business_key",
        "used": "10.000000",
        "limit": "10.000000",
        "remaining": "0.000000",
        "exhausted": True,
        "on_exhausted": "hold",
        "period_seconds": None,
        "held": 1,
    }
    assert rows[""]["held"] == 1 and rows[""]["exhausted"] is False
    one = api("viewer").get(f"/api/budgets/{counter.pk}/")
    assert one.json()["id"] == counter.pk
    filtered = api("viewer").get("/api/budgets/?scope_key=acme")
    assert [row["id"] for row in filtered.json()["results"]] == [counter.pk]
    assert api("nobody").get("/api/budgets/").status_code == 403
    assert api("anonymous").get("/api/budgets/").status_code == 401


def test_operators_raise_and_reset(api, counter):
    raised = api("operator").post(
        f"/api/budgets/{counter.pk}/raise/", {"limit": "25.5"}, format="json"
    )
    assert raised.status_code == 200
    body = raised.json()
    assert (body["released"], body["limit_before"], body["used_before"]) == (
        1,
        "10.000000",
        "10.000000",
    )
    assert body["budget"]["limit"] == "25.500000"
    assert body["budget"]["held"] == 0
    reset = api("operator").post(f"/api/budgets/{counter.pk}/reset/", {}, format="json")
    assert reset.status_code == 200
    assert reset.json()["budget"]["used"] == "0.000000"
    counter.refresh_from_db()
    assert (counter.used, counter.limit) == (Decimal(0), Decimal("25.5"))
    number = api("operator").post(f"/api/budgets/{counter.pk}/raise/", {"limit": 40}, format="json")
    assert number.json()["budget"]["limit"] == "40.000000"


def test_viewers_may_not_change_budgets(api, counter):
    refused = api("viewer").post(f"/api/budgets/{counter.pk}/raise/", {"limit": 50}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert api("viewer").post(f"/api/budgets/{counter.pk}/reset/").status_code == 403
    counter.refresh_from_db()
    assert (counter.used, counter.limit) == (Decimal(10), Decimal(10))


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({}, "limit", "This field is required."),
        ({"limit": "lots"}, "limit", "A valid number is required."),
        ({"limit": True}, "limit", "A valid number is required."),
        ({"limit": None}, "limit", "This field may not be null."),
        ({"limit": -1}, "limit", "Ensure this value is greater than or equal to 0."),
        ({"limit": "1.1234567"}, "limit", "Ensure that there are no more than 6 decimal places."),
        ({"limit": 10**18}, "limit", "Ensure that there are no more than 18 digits before"),
        ({"limit": 5, "limt": 5}, "limt", "this field is not accepted here"),
    ],
)
def test_malformed_raise_bodies_are_400s_naming_the_field(api, counter, body, field, message):
    refused = api("operator").post(f"/api/budgets/{counter.pk}/raise/", body, format="json")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "validation_error"
    assert error["details"][field][0].startswith(message)
    counter.refresh_from_db()
    assert counter.limit == 10


def test_malformed_json_unknown_fields_and_unknown_budgets(api, counter):
    operator = api("operator")
    broken = operator.post(
        f"/api/budgets/{counter.pk}/raise/", "{", content_type="application/json"
    )
    assert (broken.status_code, broken.json()["error"]["code"]) == (400, "malformed_request")
    extra = operator.post(f"/api/budgets/{counter.pk}/reset/", {"all": True}, format="json")
    assert extra.status_code == 400
    assert extra.json()["error"]["details"] == {"all": ["this field is not accepted here"]}
    for missing in ("999999", "abc"):
        gone = operator.post(f"/api/budgets/{missing}/reset/", {}, format="json")
        assert gone.status_code == 404
        assert gone.json()["error"]["code"] == "budget_not_found"
    assert api("viewer").get("/api/budgets/999999/").json()["error"]["code"] == "budget_not_found"
