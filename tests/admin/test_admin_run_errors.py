"""The run page's errors name the attempt that raised them, and say when a later
attempt succeeded (a step keeps its last error after it recovers)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.admin.admin_console import failed_checkout, staff
from workflows.models import Run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(client):
    client.force_login(staff("viewer"))
    return client


def error_html(client, run: Run) -> str:
    page = client.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()
    start = page.index('id="errors-title"')
    return page[start : page.index("</section>", start)]


def test_an_error_a_later_attempt_recovered_from_names_its_own_attempt(viewer):
    """flaky_import fails attempts 1 and 2 and succeeds on attempt 3 of 4."""
    run = workflows.start_run("flaky_import", {"rows": 3})
    run_pending(until=timezone.now() + timedelta(minutes=5))
    step = run.steps.get(name="import_batch")
    assert (step.status, step.attempt, step.error["attempt"]) == ("completed", 3, 2)
    html = error_html(viewer, run)
    assert "<strong>import_batch</strong> (attempt 2 of 4): <code>builtins.ConnectionError" in html
    assert "upstream feed unavailable (attempt 2)" in html
    assert "A later attempt succeeded: attempt 3 of 4 completed the step." in html
    assert "(attempt 3 of 4):" not in html


def test_an_error_that_failed_the_step_says_nothing_of_a_later_attempt(viewer):
    run = failed_checkout()
    html = error_html(viewer, run)
    assert "<strong>charge</strong> (attempt 1 of 1): <code>builtins.RuntimeError" in html
    assert "later attempt" not in html
