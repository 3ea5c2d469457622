"""The run page and the flow page stay live in a real browser: a page opened while a step
only waits shows the step start (the run's status, the steps table, a new "Running now"
block) without a reload, and the flow page shows a member's run end."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

import workflows
from tests.browser.chromium import shoot
from tests.browser.test_console import operator, sign_in
from tests.support.live_rows import Export, report
from tests.support.workflows import Unit
from workflows.engine import claim_step

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_step_that_starts_while_the_run_page_is_open_appears_in_place(new_page):
    run = workflows.start_run(Export, {"rows": 10})
    step = run.steps.get(name="export")
    operator()
    page = new_page()
    sign_in(page, f"/admin/workflows/run/{run.pk}/change/")
    expect(page.locator("#explain .holds")).to_contain_text("is ready since")
    expect(page.locator("#live")).to_have_count(0)
    page.evaluate("window.notReloaded = true")
    shoot(page, "live-run-before-a-step-starts")

    claim_step(step.pk, "worker-3")
    report(step, 4, 10, "importing row 4 of 10")

    block = page.locator(f"#live-{step.pk}")
    expect(block).to_be_visible()
    expect(block.locator(".live-head")).to_contain_text("worker-3")
    expect(page.locator("#explain .holds")).to_contain_text("Worker worker-3 runs step “export”")
    expect(page.locator("#step-export .wf-badge").first).to_have_text("running")
    expect(page.locator("svg.wf-graph .wf-node.st-running")).to_have_count(1)
    shoot(page, "live-run-after-a-step-starts")

    workflows.cancel_run(run, reason="seen enough")
    expect(page.locator("#run-status")).to_have_text("cancelling")
    expect(block.locator(".live-stop-note")).to_contain_text("stops at its next heartbeat")
    expect(page.locator("#explain .holds")).to_contain_text("Cancel requested")
    shoot(page, "live-run-cancelling")
    assert page.evaluate("window.notReloaded === true")


def test_the_flow_page_shows_a_members_run_end_in_place(new_page):
    flow = workflows.create_flow("nightly")
    build = workflows.add_to_flow(flow, Unit, {}, member="build")
    workflows.add_to_flow(flow, Unit, {}, member="test", after=("build",))
    operator()
    page = new_page()
    sign_in(page, f"/admin/workflows/flow/{flow.pk}/change/")
    row = page.locator("#member-build")
    expect(row.locator(".wf-badge")).not_to_have_text("cancelled")
    page.evaluate("window.notReloaded = true")

    workflows.cancel_run(build, reason="broken build")

    expect(row.locator(".wf-badge")).to_have_text("cancelled")
    expect(page.locator("#summary")).to_contain_text("cancelled")
    assert page.evaluate("window.notReloaded === true")
