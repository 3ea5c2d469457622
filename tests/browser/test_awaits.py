"""A run whose handler awaits a signal, in a real browser: the run page says what it
awaits and until when, and sending the signal from the console resumes the handler."""

from __future__ import annotations

import pytest

import workflows
from tests.browser.chromium import shoot
from tests.browser.test_console import operator, sign_in
from workflows.models import Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_run_page_shows_the_await_and_a_signal_from_it_resumes_the_handler(new_page):
    run = workflows.start_run(
        "catalogue_import",
        {"supplier": "acme", "columns": ["sku", "name", "colour_code"]},
        business_key="ACME-2026-11",
    )
    run_pending()
    operator()
    page = new_page()
    sign_in(page, f"/admin/workflows/run/{run.pk}/change/")
    assert page.viewport_size["width"] == 1400
    body = page.locator("body")
    assert "Task “import_file” awaits signal “mapping”; times out in 23\xa0hours" in (
        body.inner_text()
    )
    shoot(page, "await-run")

    page.get_by_role("link", name="Send a signal").first.click()
    page.wait_for_load_state()
    page.get_by_label("Name").select_option("mapping")
    page.get_by_label("Payload").fill('{"colour_code": "colour"}')
    page.get_by_role("button", name="Send a signal").click()
    page.wait_for_load_state()
    step = Step.objects.get(run=run)
    assert step.status == "ready"
    assert step.resumed == {"signal": "mapping", "payload": {"colour_code": "colour"}}
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
