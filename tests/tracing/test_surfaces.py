"""Where an operator meets a run's trace: its id on the run page, linked through
``WORKFLOWS["TRACE_URL"]``, and in the API's run; and the tracing settings refused when
they cannot work."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.urls import reverse

import workflows
from tests.support.spans import SpanRecorder
from tests.support.workflows import Work
from workflows.conf import workflow_settings
from workflows.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    client.force_login(User.objects.create_superuser("root"))
    return client


def traced_run(spans: SpanRecorder) -> tuple[Run, str]:
    with spans.tracer.start_as_current_span("POST /orders") as request:
        run = workflows.start_run(Work, {})
    return run, f"{request.get_span_context().trace_id:032x}"


def test_the_run_page_shows_the_trace_id_linked_by_the_template(spans, staff_client):
    run, trace_id = traced_run(spans)
    url = reverse("admin:workflows_run_change", args=[run.pk])
    page = staff_client.get(url).content.decode()
    assert f'<strong class="wf-id">{trace_id}</strong>' in page
    template = "https://tempo.example.com/explore/trace/{trace_id}?orgId=1"
    with override_settings(WORKFLOWS={**settings.WORKFLOWS, "TRACE_URL": template}):
        page = staff_client.get(url).content.decode()
    assert f'href="https://tempo.example.com/explore/trace/{trace_id}?orgId=1"' in page


def test_an_untraced_run_shows_no_trace(staff_client):
    run = workflows.start_run(Work, {})
    page = staff_client.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert b'id="run-trace"' not in page.content


def test_the_api_gives_a_runs_trace_id(spans, admin_client):
    run, trace_id = traced_run(spans)
    assert admin_client.get(f"/api/runs/{run.pk}/").json()["trace_id"] == trace_id
    with override_settings(WORKFLOWS={**settings.WORKFLOWS, "TRACING": False}):
        untraced = workflows.start_run(Work, {})
    assert admin_client.get(f"/api/runs/{untraced.pk}/").json()["trace_id"] == ""


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("TRACING", "yes"),
        ("TRACE_URL", "https://tempo.example.com/trace/"),
        ("TRACE_URL", "https://tempo.example.com/{trace}"),
        ("TRACE_URL", "https://tempo.example.com/{trace_id}/{span_id}"),
        ("TRACE_URL", 42),
    ],
    ids=["tracing-not-bool", "no-field", "other-field", "extra-field", "not-text"],
)
def test_tracing_settings_that_cannot_work_are_refused(key, value):
    with (
        override_settings(WORKFLOWS={**settings.WORKFLOWS, key: value}),
        pytest.raises(ImproperlyConfigured, match=key),
    ):
        workflow_settings.TRACING  # noqa: B018
