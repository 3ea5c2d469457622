"""The run page of a traced run: its trace id among the run's facts, a link into the
project's trace viewer through ``WORKFLOWS["TRACE_URL"]``, opening in a new tab."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings
from playwright.sync_api import expect

import workflows
from tests.browser.chromium import shoot
from tests.browser.test_console import operator, sign_in
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)

PARCELS = [{"id": "P1", "weight_kg": 1.5}]
VIEWER = "https://grafana.example.com/explore?traceId={trace_id}"


def test_the_run_page_links_the_runs_trace(new_page, spans):
    with spans.tracer.start_as_current_span("POST /orders") as request:
        run = workflows.start_run(
            "warehouse_dispatch", {"order_id": "W-3001", "card": "valid", "parcels": PARCELS}
        )
    run_pending()
    trace_id = f"{request.get_span_context().trace_id:032x}"
    operator()
    page = new_page()
    with override_settings(WORKFLOWS={**settings.WORKFLOWS, "TRACE_URL": VIEWER}):
        sign_in(page, f"/admin/workflows/run/{run.pk}/change/")
        link = page.locator("#run-trace a")
        expect(link).to_have_text(trace_id)
        expect(link).to_have_attribute("href", VIEWER.format(trace_id=trace_id))
        expect(link).to_have_attribute("target", "_blank")
        shoot(page, "run-trace")
