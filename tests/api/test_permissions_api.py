"""The API's permission classes ask the verb table (``workflows.services.access``): run
verbs and budget verbs need ``operate_run`` of the caller, gate verbs the gate's rule."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

import workflows
from tests.api.conftest import user_with
from tests.support.verb_access import (
    Leased,
    Reviewed,
    Waiting,
    asked as asked,  # a fixture, requested by name
)
from workflows.engine import claim_step
from workflows.engine.limits.budgets import record_usage
from workflows.models import BudgetCounter, Run, Step
from workflows.services.access import OPERATE_RUNS
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def as_user(client: Any, *codenames: str) -> Any:
    client.force_authenticate(
        user_with(f"user-{len(codenames)}-{'-'.join(codenames)}", list(codenames))
    )
    return client


@pytest.fixture
def client() -> APIClient:
    return APIClient()


def test_a_run_verb_needs_operate_run(client, asked):
    run = workflows.start_run(Waiting, {})
    run_pending()
    url = f"/api/runs/{run.pk}/pause/"
    refused = as_user(client, "view_run").post(url, {"attempt": 1}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "permission_denied")
    assert Run.objects.get(pk=run.pk).status == "waiting"
    assert (
        as_user(client, "view_run", "operate_run").post(url, {}, format="json").status_code == 200
    )
    assert Run.objects.get(pk=run.pk).status == "paused"
    assert asked.count(OPERATE_RUNS) == 2


def test_a_step_verb_revoke_needs_operate_run(client, asked):
    run = workflows.start_run(Leased, {})
    step = run.steps.get(name="work")
    claim_step(step.pk, "wedged-worker")
    url = f"/api/steps/{step.pk}/revoke/"
    refused = as_user(client, "view_run").post(url, {"attempt": 1}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "permission_denied")
    assert Step.objects.get(pk=step.pk).status == "running"
    allowed = as_user(client, "view_run", "operate_run").post(url, {"attempt": 1}, format="json")
    assert allowed.status_code == 200
    assert Step.objects.get(pk=step.pk).status == "ready"
    assert asked.count(OPERATE_RUNS) == 2


def test_a_budget_verb_needs_operate_run(client):
    run = workflows.start_run(Waiting, {})
    record_usage(run.pk, None, 1, Waiting, "tokens", 10)
    counter = BudgetCounter.objects.get(workflow_name=Waiting.name)
    url = f"/api/budgets/{counter.pk}/reset/"
    assert as_user(client, "view_run").post(url, {}, format="json").status_code == 403
    assert (
        as_user(client, "view_run", "operate_run").post(url, {}, format="json").status_code == 200
    )
    counter.refresh_from_db()
    assert counter.used == 0


def test_a_gate_verb_needs_the_gates_rule(client):
    run = workflows.start_run(Reviewed, {})
    run_pending()
    gate = run.steps.get(name="review")
    url = f"/api/gates/{gate.pk}/approve/"
    refused = as_user(client, "view_run", "operate_run").post(url, {}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "permission_denied")
    assert as_user(client, "view_step").post(url, {}, format="json").status_code == 200
    gate.refresh_from_db()
    assert gate.decision == "approved"
