"""Traces through operator verbs and waits: every attempt a run makes stays in the
run's one trace whatever made it run again (an operator's retry or rerun, a lease taken
back, a signal that resumed an await), and each attempt's span says how it ended."""

from __future__ import annotations

from typing import Any

import pytest

import workflows
from tests.support.handlers import ASK_BANK, AWAIT_MAPPING, BROKEN, WORK
from tests.support.spans import RecordedSpan, SpanRecorder
from workflows import Retry, Task, Workflow
from workflows.engine import STEP, claim
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db
ONCE = Retry(max_attempts=1)


class Mended(Workflow):
    name = "tracing_mended"
    fetch = Task(WORK, retry=ONCE)
    report = Task(WORK, retry=ONCE)


class Asks(Workflow):
    name = "tracing_asks"
    mapping = Task(AWAIT_MAPPING, awaits=["mapping", "skip"])
    bank = Task(ASK_BANK)


def _steps(spans: SpanRecorder, name: str) -> list[RecordedSpan]:
    return [
        span
        for span in spans.named("workflow.step")
        if span.attributes["flowsite.step.name"] == name
    ]


def _outcomes(spans: list[RecordedSpan]) -> list[Any]:
    return [span.attributes["flowsite.outcome"] for span in spans]


def test_an_operators_retry_and_rerun_stay_in_the_runs_trace(spans: SpanRecorder):
    BROKEN.add("fetch")
    run = workflows.start_run(Mended, {})
    run_pending()
    BROKEN.clear()
    workflows.retry_run(run)
    run_pending()
    workflows.rerun_from(run, "report", reason="check the figures")
    run_pending()
    (start,) = spans.named("workflow.start")
    assert _outcomes(_steps(spans, "fetch")) == ["failed", "completed"]
    assert _outcomes(_steps(spans, "report")) == ["completed", "completed"]
    for span in spans.named("workflow.step"):
        assert (span.trace_id, span.parent_id) == (start.trace_id, start.span_id)


def test_a_revoked_lease_and_its_next_attempt_are_in_the_trace(spans: SpanRecorder):
    run = workflows.start_run(Mended, {})
    step = run.steps.get(name="fetch")
    held = claim(STEP, step.pk, "worker-a")
    workflows.revoke_lease(step.pk, expected_attempt=held.attempt, reason="stuck")
    run_pending()
    (start,) = spans.named("workflow.start")
    # Attempt 1 was claimed here and revoked before a handler ran: no span; attempt 2 ran.
    (attempt,) = _steps(spans, "fetch")
    assert (attempt.parent_id, attempt.attributes["flowsite.step.attempt"]) == (start.span_id, 2)
    assert attempt.attributes["flowsite.outcome"] == "completed"


def test_awaiting_and_callback_attempts_say_so_and_their_resumption_joins_the_trace(
    spans: SpanRecorder,
):
    run = workflows.start_run(Asks, {})
    run_pending()
    assert _outcomes(_steps(spans, "mapping")) == ["awaiting"]
    workflows.send_signal(run, "mapping", {"sku": "A"})
    run_pending()
    assert _outcomes(_steps(spans, "mapping")) == ["awaiting", "completed"]
    assert _outcomes(_steps(spans, "bank")) == ["waiting_for_callback"]
    (start,) = spans.named("workflow.start")
    assert {span.parent_id for span in spans.named("workflow.step")} == {start.span_id}
    (decision,) = spans.named("workflow.decision")
    assert decision.events[0][0] == "workflow.signal"
