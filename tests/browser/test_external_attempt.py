"""The run page of the demo's dispatch whose label an external worker is printing: the
hold names the external worker and its lease, the "Running now" block shows its
progress and log line like any attempt's, the steps table and the graph say the step is
external; before the claim, the hold says it waits for an external worker."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

import workflows
from tests.browser.chromium import shoot
from tests.browser.test_console import operator, sign_in
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)

PARCELS = [{"id": "P1", "weight_kg": 1.5}, {"id": "P2", "weight_kg": 0.4}]


def test_the_run_page_shows_an_external_workers_attempt(new_page):
    run = workflows.start_run(
        "warehouse_dispatch", {"order_id": "W-2001", "card": "valid", "parcels": PARCELS}
    )
    run_pending()
    approver = User.objects.create_superuser("dispatcher")
    workflows.approve_gate(run.steps.get(name="approval"), user=approver, selections=["express"])
    run_pending()
    operator()
    page = new_page()
    sign_in(page, f"/admin/workflows/run/{run.pk}/change/")
    holds = page.locator("#explain .holds")
    expect(holds).to_contain_text(
        "Step “print_label” waits for an external worker to claim it from queue labels"
    )
    expect(page.locator("#step-print_label .step-route")).to_have_text("external queue 'labels'")

    [job] = workflows.claim_external(["labels"], worker="label-printer-1")
    workflows.heartbeat_external(job.lease, progress=(1, 2), message="printing order W-2001")
    workflows.log_external(job.lease, "label LBL-W-2001 sent to printer bay 3")
    page.reload()
    expect(holds).to_contain_text(
        "External worker label-printer-1 runs step “print_label” (attempt 1 of 3), lease until in"
    )
    block = page.locator("#live .live-step")
    expect(block.locator(".live-head")).to_contain_text(
        "attempt 1 of 3 on external worker label-printer-1"
    )
    expect(block.locator(".live-message")).to_have_text("printing order W-2001")
    expect(block.locator(".live-tail")).to_contain_text("label LBL-W-2001 sent to printer bay 3")
    expect(page.locator("svg.wf-graph .wf-node.st-running")).to_contain_text("external")
    shoot(page, "external-attempt")
