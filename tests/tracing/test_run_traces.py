"""Traces of runs made in this process: one trace from the request that starts a run to
its last attempt, child runs and flow members in it, outcomes and errors on the attempts'
spans, a handler's own spans and log records under its attempt, decisions as events.

Spans are recorded with the SDK's in-memory exporter (the ``spans`` fixture); the steps
run inline (``run_pending``), as a worker runs them, in one process. The same across
processes: ``tests/acceptance/test_traces_processes.py``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

import workflows
from tests.support.handlers import UNDO, WORK
from tests.support.spans import RecordedSpan, SpanRecorder
from workflows import FanOut, Gate, Retry, SubWorkflow, Task, WaitForSignal, Workflow
from workflows.models import Run
from workflows.testing import run_pending
from workflows.tracing import trace_id_of

pytestmark = pytest.mark.django_db

CALLS_OUT = f"{__name__}.calls_out"
FAILS = f"{__name__}.fails"
logger = logging.getLogger("tests.tracing.handler")


def calls_out(ctx: Any) -> str:
    """A handler that makes a span of its own (as an instrumented HTTP client would) and
    logs a record (as any handler does)."""
    from opentelemetry import trace

    with trace.get_tracer("tests.http").start_as_current_span("GET /stock"):
        logger.info("asked for stock")
    return "ok"


def fails(ctx: Any) -> None:
    raise ValueError("the bank said no")


class Parent(Workflow):
    name = "tracing_parent"
    prepare = Task(WORK)
    child = SubWorkflow("tracing_child")
    finish = Task(WORK)


class Child(Workflow):
    name = "tracing_child"
    inner = Task(CALLS_OUT)


class Shipping(Workflow):
    name = "tracing_shipping"
    reserve = Task(WORK, compensate=UNDO)
    ship = FanOut(WORK, items=lambda ctx: ["p1", "p2"], key=lambda item: item)
    charge = Task(FAILS, retry=Retry(max_attempts=1))


class Approval(Workflow):
    name = "tracing_approval"
    approve = Gate(prompt="go?")
    wait = WaitForSignal("go")


def _attempts(spans: list[RecordedSpan]) -> dict[str, RecordedSpan]:
    return {
        span.attributes["flowsite.step.name"]: span
        for span in spans
        if span.name == "workflow.step" and span.attributes["flowsite.work.kind"] == "step"
    }


def test_a_run_started_in_a_request_is_one_trace_down_to_its_child_run(spans: SpanRecorder):
    with spans.tracer.start_as_current_span("POST /orders") as request:
        run = workflows.start_run("tracing_parent", {})
    request_context = request.get_span_context()
    run.refresh_from_db()
    assert trace_id_of(run.traceparent) == f"{request_context.trace_id:032x}"

    run_pending()

    recorded = spans.spans()
    assert {span.trace_id for span in recorded} == {f"{request_context.trace_id:032x}"}
    starts = {
        span.attributes["flowsite.workflow.name"]: span for span in spans.named("workflow.start")
    }
    parent_start, child_start = starts["tracing_parent"], starts["tracing_child"]
    assert parent_start.parent_id == f"{request_context.span_id:016x}"
    assert parent_start.attributes["flowsite.run.id"] == str(run.pk)
    assert run.traceparent.split("-")[2] == parent_start.span_id
    attempts = _attempts(recorded)
    assert {attempts[name].parent_id for name in ("prepare", "finish")} == {parent_start.span_id}
    # The child starts under its parent run's start, and its attempts under its own.
    assert child_start.parent_id == parent_start.span_id
    assert child_start.attributes["flowsite.run.parent_id"] == str(run.pk)
    assert attempts["inner"].parent_id == child_start.span_id
    for span in attempts.values():
        assert span.attributes["flowsite.outcome"] == "completed"
        assert span.attributes["flowsite.step.attempt"] == 1
        assert span.attributes["flowsite.queue"] == "default"
        assert span.attributes["flowsite.worker"]
        assert span.status == "UNSET"
    assert attempts["inner"].attributes["code.function.name"] == CALLS_OUT


def test_a_handlers_own_spans_and_log_records_nest_under_its_attempt(
    spans: SpanRecorder, caplog: pytest.LogCaptureFixture
):
    """The attempt's span is current while the handler runs: an instrumented client's
    span is its child, and a log record carries its trace and span ids (OpenTelemetry's
    logging integration, which stamps each record with the current span's)."""
    from opentelemetry.instrumentation.logging import LoggingInstrumentor

    instrumentor = LoggingInstrumentor()
    instrumentor.instrument(inject_trace_context=True)
    try:
        with caplog.at_level(logging.INFO, logger=logger.name):
            workflows.start_run("tracing_child", {})
            run_pending()
    finally:
        instrumentor.uninstrument()
    attempt = _attempts(spans.spans())["inner"]
    (call,) = spans.named("GET /stock")
    assert call.parent_id == attempt.span_id
    assert call.trace_id == attempt.trace_id
    (record,) = [record for record in caplog.records if record.name == logger.name]
    assert (record.otelTraceID, record.otelSpanID) == (attempt.trace_id, call.span_id)


def test_items_compensations_and_failures_have_their_spans(spans: SpanRecorder):
    run = workflows.start_run("tracing_shipping", {})
    run_pending()
    run.refresh_from_db()
    assert run.status == "compensated"
    (start,) = spans.named("workflow.start")
    by_kind: dict[str, list[RecordedSpan]] = {}
    for span in spans.named("workflow.step"):
        assert span.parent_id == start.span_id
        by_kind.setdefault(span.attributes["flowsite.work.kind"], []).append(span)
    assert sorted(span.attributes["flowsite.item.key"] for span in by_kind["item"]) == ["p1", "p2"]
    (compensation,) = by_kind["compensation"]
    assert compensation.attributes["flowsite.step.name"] == "reserve"
    assert compensation.attributes["code.function.name"] == UNDO
    charge = _attempts(spans.spans())["charge"]
    assert charge.attributes["flowsite.outcome"] == "failed"
    assert charge.status == "ERROR"
    assert charge.attributes["error.type"] == "ValueError"
    ((event, attributes),) = charge.events
    assert event == "exception"
    assert attributes["exception.message"] == "the bank said no"


def test_flow_members_continue_the_flows_trace(spans: SpanRecorder):
    with spans.tracer.start_as_current_span("POST /builds"):
        flow = workflows.create_flow("nightly")
    # Added later, from no traced request: the members still start under the flow.
    first = workflows.add_to_flow(flow.pk, "tracing_child", {}, member="compile")
    second = workflows.add_to_flow(flow.pk, "tracing_child", {}, member="test", after=["compile"])
    run_pending()
    (flow_span,) = spans.named("workflow.flow")
    assert flow_span.attributes["flowsite.flow.name"] == "nightly"
    flow.refresh_from_db()
    assert flow.traceparent.split("-")[2] == flow_span.span_id
    starts = {span.attributes["flowsite.run.id"]: span for span in spans.named("workflow.start")}
    for member in (first, second):
        assert starts[str(member.pk)].parent_id == flow_span.span_id
        assert starts[str(member.pk)].trace_id == flow_span.trace_id
        assert starts[str(member.pk)].attributes["flowsite.flow.id"] == str(flow.pk)
    assert {span.trace_id for span in spans.spans()} == {flow_span.trace_id}


def test_decisions_are_events_on_the_callers_span_linked_to_the_run(
    spans: SpanRecorder, admin_user
):
    run = workflows.start_run("tracing_approval", {})
    run_pending()
    (start,) = spans.named("workflow.start")
    gate = run.steps.get(name="approve")
    with spans.tracer.start_as_current_span("POST /approve") as request:
        workflows.approve_gate(gate, user=admin_user)
    run_pending()
    (answered,) = [span for span in spans.spans() if span.name == "POST /approve"]
    assert answered.span_id == f"{request.get_span_context().span_id:016x}"
    ((event, attributes),) = answered.events
    assert event == "workflow.gate.approved"
    assert attributes == {
        "flowsite.run.id": str(run.pk),
        "flowsite.step.name": "approve",
        "flowsite.gate.decision": "approved",
    }
    assert answered.links == [(start.trace_id, start.span_id)]
    # A signal sent outside any span: a short span in the run's own trace carries it.
    workflows.send_signal(run, "go", {"ok": True})
    (decision,) = spans.named("workflow.decision")
    assert (decision.trace_id, decision.parent_id) == (start.trace_id, start.span_id)
    assert decision.events == [
        (
            "workflow.signal",
            {
                "flowsite.run.id": str(run.pk),
                "flowsite.signal.name": "go",
                "flowsite.signal.created": True,
            },
        )
    ]


def test_an_untraced_start_leaves_no_context_and_work_still_runs(spans: SpanRecorder, settings):
    settings.WORKFLOWS = {**getattr(settings, "WORKFLOWS", {}), "TRACING": False}
    run = workflows.start_run("tracing_parent", {})
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.traceparent == ""
    # The handler's own span is all there is, a root: no attempt span was current.
    ((call),) = spans.spans()
    assert (call.name, call.parent_id) == ("GET /stock", "")


def test_without_an_sdk_no_span_is_made_and_no_context_is_stored():
    """The API is installed here, but no provider was set up: its proxy is no-op, and
    Flowsite makes nothing (the ``spans`` fixture is not used)."""
    from opentelemetry import trace

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    run = workflows.start_run("tracing_parent", {})
    run_pending()
    assert Run.objects.get(pk=run.pk).traceparent == ""
