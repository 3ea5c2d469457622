"""The run page in a real browser: a running step's progress bar, message and log lines
change in place when the step reports (live.js polling the API), with no reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_console import operator, sign_in
from tests.support.live_rows import log, report, running_step
from workflows.models import Step

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_progress_bar_and_log_lines_update_in_place(new_page):
    step = running_step()
    report(step, 2, 10, "exporting rows 11-20")
    log(step, "started export")
    operator()
    page = new_page()
    sign_in(page, f"/admin/workflows/run/{step.run_id}/change/")
    block = page.locator(f"#live-{step.pk}")
    expect(block.locator(".live-count")).to_have_text("2 of 10 (20%)")
    page.evaluate("window.notReloaded = true")

    report(step, 7, 10, "exporting rows 71-80 <b>fast</b>")
    log(step, "row batch 7 done", "<script>window.injected = true</script>")

    expect(block.locator(".live-count")).to_have_text("7 of 10 (70%)")
    expect(block.locator(".live-message")).to_have_text("exporting rows 71-80 <b>fast</b>")
    assert block.locator("progress").get_attribute("value") in ("70", "70.0")
    expect(block.locator(".live-line").last).to_have_text("<script>window.injected = true</script>")
    expect(block.locator(".live-line")).to_have_count(3)

    expect(block.locator(".live-summary")).to_be_hidden()
    # One member: jsonb (PostgreSQL) keeps keys in its own order.
    Step.objects.filter(pk=step.pk).update(summary={"note": "<i>ok</i>"})
    expect(block.locator(".live-summary pre")).to_have_text('{\n  "note": "<i>ok</i>"\n}')

    report(step, 12, None, "")  # the total turned out unknown: an indeterminate bar
    expect(block.locator(".live-count")).to_have_text("12 done")
    assert block.locator("progress").get_attribute("value") is None

    Step.objects.filter(pk=step.pk).update(status="completed")
    expect(block.locator(".live-note")).to_be_visible()
    expect(block.locator(".live-status")).to_have_text("completed")
    assert page.evaluate("window.notReloaded === true && window.injected === undefined")
