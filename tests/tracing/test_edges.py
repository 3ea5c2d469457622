"""Traces where work leaves the process: an external worker's attempts, webhook
deliveries (a client span, and the W3C headers a traced receiver continues from); and a
project without OpenTelemetry, where nothing of it is imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import workflows
from tests.support.spans import SpanRecorder
from tests.support.webhook_receiver import Receiver
from tests.support.workflows import Work
from workflows import Task, Workflow
from workflows.testing import run_pending
from workflows.webhooks import services

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


class Printing(Workflow):
    name = "tracing_printing"
    print_label = Task(external=True, queue="tracing-labels")


def test_an_external_attempt_is_a_span_from_its_claim_to_its_end(
    spans: SpanRecorder, django_capture_on_commit_callbacks
):
    with spans.tracer.start_as_current_span("POST /orders"):
        run = workflows.start_run("tracing_printing", {})
    run.refresh_from_db()
    before = time.time_ns()
    (job,) = workflows.claim_external(["tracing-labels"], worker="printer-1")
    assert job.traceparent == run.traceparent
    assert spans.named("workflow.step") == []  # nothing until the worker says how it ended
    with django_capture_on_commit_callbacks(execute=True):  # the span is made on commit
        workflows.complete_external(job.lease, {"label": "L-1"})
    (start,) = spans.named("workflow.start")
    (attempt,) = spans.named("workflow.step")
    assert (attempt.trace_id, attempt.parent_id) == (start.trace_id, start.span_id)
    assert attempt.attributes["flowsite.work.kind"] == "external"
    assert attempt.attributes["flowsite.outcome"] == "completed"
    assert attempt.attributes["flowsite.worker"] == "external:printer-1"
    assert attempt.attributes["flowsite.queue"] == "tracing-labels"
    assert before <= attempt.start_ns <= attempt.end_ns


def test_a_failed_external_attempt_is_an_error_span(
    spans: SpanRecorder, django_capture_on_commit_callbacks
):
    workflows.start_run("tracing_printing", {})
    (job,) = workflows.claim_external(["tracing-labels"], worker="printer-1")
    with django_capture_on_commit_callbacks(execute=True):
        workflows.fail_external(job.lease, "out of paper")
    (attempt,) = spans.named("workflow.step")
    assert attempt.attributes["flowsite.outcome"] == "failed"
    assert attempt.status == "ERROR"
    assert attempt.attributes["error.type"] == "ExternalWorkFailed"


def test_a_webhook_delivery_is_a_client_span_whose_context_the_receiver_gets(
    spans: SpanRecorder,
):
    with Receiver() as receiver:
        endpoint = services.create_endpoint(url=receiver.url, event_types=["run.completed"])
        receiver.secret = endpoint.secret
        workflows.start_run(Work, {})
        run_pending()
        (request,) = receiver.requests
    (start,) = spans.named("workflow.start")
    (post,) = spans.named("POST")
    assert (post.trace_id, post.parent_id, post.kind) == (start.trace_id, start.span_id, "CLIENT")
    assert post.attributes["http.request.method"] == "POST"
    assert post.attributes["url.full"] == receiver.url
    assert post.attributes["server.address"] == "127.0.0.1"
    assert post.attributes["http.response.status_code"] == 200
    assert request.verified  # the trace headers are not part of what is signed
    version, trace_id, parent_id, flags = request.headers["traceparent"].split("-")
    assert (version, trace_id, parent_id) == ("00", post.trace_id, post.span_id)
    assert int(flags, 16) & 1  # sampled


def test_a_failed_delivery_is_an_error_span(spans: SpanRecorder, settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "WEBHOOK_RETRY_DELAYS": ()}
    with Receiver(script=[500]) as receiver:
        endpoint = services.create_endpoint(url=receiver.url, event_types=["run.completed"])
        receiver.secret = endpoint.secret
        workflows.start_run(Work, {})
        run_pending()
    (post,) = spans.named("POST")
    assert post.attributes["http.response.status_code"] == 500
    assert (post.status, post.attributes["error.type"]) == ("ERROR", "500")


@pytest.mark.processes
def test_without_opentelemetry_nothing_of_it_is_imported_and_runs_go_on(tmp_path: Path):
    """A fresh interpreter where ``import opentelemetry`` fails, as in a project without
    the extra: every module of the app imports, a run completes, no context is stored,
    and nothing tried to import OpenTelemetry but the one lazy probe."""
    script = textwrap.dedent(
        """
        import importlib, pkgutil, sys

        attempts = []

        class Absent:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "opentelemetry":
                    attempts.append(name)
                    raise ImportError(f"No module named {name!r}")
                return None

        sys.meta_path.insert(0, Absent())
        import django
        django.setup()
        import workflows
        for module in pkgutil.walk_packages(workflows.__path__, "workflows."):
            if ".migrations" not in module.name:
                importlib.import_module(module.name)
        assert attempts == [], attempts
        from django.core.management import call_command
        call_command("migrate", verbosity=0)
        from workflows.testing import run_pending
        from tests.support.workflows import Work
        run = workflows.start_run(Work, {})
        run_pending()
        run.refresh_from_db()
        assert (run.status, run.traceparent) == ("completed", ""), run.status
        assert attempts == ["opentelemetry"], attempts
        assert not any(name.startswith("opentelemetry") for name in sys.modules)
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "FLOWSITE_VAR_DIR": str(tmp_path),
            "DATABASE_URL": "",
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
