"""Operators in a real browser: a bulk cancel after its dry run, and the run page's graph."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.admin.admin_console import checkout
from tests.support import browser
from workflows.models import CompensationRecord, Event, Run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)


def operator() -> User:
    return browser.person("operator", "view_run", "operate_run")


def sign_in(page: Any, next_path: str) -> None:
    browser.sign_in(page, "operator", next_path)


def test_an_operator_bulk_cancels_after_the_dry_run_and_sees_compensation(new_page):
    runs = [checkout(order=f"B-{n}") for n in range(2)]
    operator()
    page = new_page()
    sign_in(page, "/admin/workflows/run/")

    for run in runs:
        page.locator(f'input[name="_selected_action"][value="{run.pk}"]').check()
    page.locator('select[name="action"]').select_option("bulk_cancel")
    # The action bar's submit button: "Go" up to Django 6.0, "Run" from 6.1.
    page.locator('.actions button[name="index"]').first.click()

    totals = page.locator("#dry-run").inner_text()
    assert "2\nmatched" in totals and "2\neligible" in totals and "0\nskipped" in totals
    assert all(Run.objects.get(pk=run.pk).status == "waiting" for run in runs)
    page.get_by_label("Reason").fill("orders withdrawn")
    page.get_by_role("button", name="Cancel selected runs (2 eligible)").click()
    note = page.locator(".messagelist .success").inner_text()
    assert "Bulk cancel: 2 matched, 2 done, 0 skipped, 0 failed." in note

    run_pending()  # the compensations run in this process (inline executor)
    page.goto(f"/admin/workflows/run/{runs[0].pk}/change/")
    assert page.locator("#run-status").inner_text().strip() == "cancelled"
    compensations = page.locator("section", has=page.locator("#compensations-title"))
    assert "completed" in compensations.inner_text()
    assert "release" in compensations.inner_text()
    for run in runs:
        assert CompensationRecord.objects.get(run=run).status == "completed"
        assert Event.objects.get(run=run, type="run.cancel_requested").payload["by"] == "operator"


def test_the_run_page_draws_the_graph_with_each_steps_state(new_page):
    run = checkout(order="G-1")
    operator()
    page = new_page()
    sign_in(page, f"/admin/workflows/run/{run.pk}/change/")

    graph = page.locator("svg.wf-graph")
    assert graph.is_visible()
    assert graph.locator("title").first.text_content().startswith("Steps of console_checkout")
    states = {
        name: graph.locator(f'a[href="#step-{name}"]').get_attribute("class")
        for name in ("reserve", "pack", "shipped", "charge")
    }
    assert states == {
        "reserve": "wf-node st-completed",
        "pack": "wf-node st-completed",
        "shipped": "wf-node st-waiting",
        "charge": "wf-node st-pending",
    }
    assert "3/3" in graph.locator('a[href="#step-pack"]').text_content()
    boxes = [graph.locator(f'a[href="#step-{name}"] rect').bounding_box() for name in states]
    xs = [box["x"] for box in boxes]
    assert xs == sorted(xs) and len(set(xs)) == 4  # left to right, in dependency order
    graph.locator('a[href="#step-shipped"]').click()
    assert page.url.endswith("#step-shipped")
