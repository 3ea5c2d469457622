"""The run page shows why a step's last attempt failed: a badge beside its status and
beside its error."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.admin.admin_console import staff
from workflows import Retry, Task, Workflow
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.admin.test_admin_failure_class"
BADGE = '<span class="wf-badge wf-failure-class"'


def flaky(ctx):
    raise ConnectionError("feed down")


class Flaky(Workflow):
    name = "admin_failure_flaky"
    fetch = Task(f"{HERE}.flaky", retry=Retry(max_attempts=2))


def page(client, run) -> str:
    client.force_login(staff("viewer"))
    return client.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()


def section(html: str, start: str, end: str) -> str:
    begin = html.index(start)
    return html[begin : html.index(end, begin)]


def test_a_retried_step_shows_the_class_beside_its_status_and_its_error(client):
    run = workflows.start_run(Flaky)
    run_pending()
    html = page(client, run)
    row = section(html, 'id="step-fetch"', "</tr>")
    assert "retry scheduled" in row or "retry_scheduled" in row
    assert f'{BADGE} title="its last attempt failed: transient">transient</span>' in row
    errors = section(html, 'id="errors-title"', "</section>")
    assert "feed down" in errors
    assert f'{BADGE} title="failure class of attempt 1">transient</span>' in errors


def test_a_step_that_failed_for_good_keeps_the_badge(client):
    run = workflows.start_run(Flaky)
    run_pending(until=timezone.now() + timedelta(hours=1))
    row = section(page(client, run), 'id="step-fetch"', "</tr>")
    assert "st-failed" in row
    assert f"{BADGE}" in row and ">transient</span>" in row


def test_the_history_shows_the_class_of_each_failed_attempt(client):
    run = workflows.start_run(Flaky)
    run_pending(until=timezone.now() + timedelta(hours=1))
    history = section(page(client, run), 'id="events"', "</table>")
    for entry in ("step.retry_scheduled", "step.failed"):
        row = section(history, f"<code>{entry}</code>", "</tr>")
        assert f'{BADGE} title="failure class of attempt' in row and ">transient</span>" in row
    started = section(history, "<code>step.started</code>", "</tr>")
    assert BADGE not in started
