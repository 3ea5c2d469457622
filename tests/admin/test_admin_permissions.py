"""The admin asks the verb table (``workflows.services.access``) before it offers or runs
a verb: run verbs and budget verbs need their permission, gate verbs the gate's rule."""

from __future__ import annotations

import pytest
from django.urls import reverse

import workflows
from tests.support.users import staff
from tests.support.verb_access import (
    Reviewed,
    Waiting,
    asked as asked,  # a fixture, requested by name
)
from workflows.engine.limits.budgets import record_usage
from workflows.models import BudgetCounter, Run
from workflows.services.access import CHANGE_BUDGETS, OPERATE_RUNS
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def test_a_run_verb_needs_operate_run(client, asked):
    run = workflows.start_run(Waiting, {})
    run_pending()
    act = reverse("admin:workflows_run_act", args=[run.pk, "pause"])
    client.force_login(staff("viewer", "view_run"))
    assert client.post(act, {"reason": ""}).status_code == 403
    assert Run.objects.get(pk=run.pk).status == "waiting"
    client.force_login(staff("operator", "view_run", "operate_run"))
    assert client.post(act, {"reason": ""}).status_code == 302
    assert Run.objects.get(pk=run.pk).status == "paused"
    assert OPERATE_RUNS in asked


def test_a_budget_verb_needs_operate_run(client, asked):
    run = workflows.start_run(Waiting, {})
    record_usage(run.pk, None, 1, Waiting, "tokens", 10)
    counter = BudgetCounter.objects.get(workflow_name=Waiting.name)
    act = reverse("admin:workflows_budget_act", args=[counter.pk, "reset"])
    client.force_login(staff("viewer", "view_run"))
    assert client.post(act, {}).status_code == 403
    client.force_login(staff("operator", "view_run", "operate_run"))
    assert client.post(act, {}).status_code == 302
    counter.refresh_from_db()
    assert counter.used == 0
    assert CHANGE_BUDGETS in asked


def test_a_gate_verb_needs_the_gates_rule(client):
    run = workflows.start_run(Reviewed, {})
    run_pending()
    gate = run.steps.get(name="review")
    page = reverse("admin:workflows_approval", args=[gate.pk])
    client.force_login(staff("operator", "view_run", "operate_run"))
    client.post(page, {"version": gate.version, "decision": "approve"})
    gate.refresh_from_db()
    assert gate.status == "waiting"
    client.force_login(staff("approver", "view_step"))
    client.post(page, {"version": gate.version, "decision": "approve"})
    gate.refresh_from_db()
    assert (gate.decision, gate.decided_by.username) == ("approved", "approver")
