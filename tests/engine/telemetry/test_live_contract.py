"""Live runs, the contract of issue #23 name by name: every public name called from
``workflows`` (or ``ctx``) with the keywords the contract writes, in one walk through a
run's life. The behaviour behind each name is tested in depth beside it
(test_telemetry, tests/services/test_consumers, tests/queries/test_wait_for,
tests/api/test_events_api, tests/api/test_long_poll_api)."""

from __future__ import annotations

from typing import Any

import pytest

import workflows
from workflows import Gate, Task, Workflow
from workflows.models import Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)

HERE = __name__


def reports(ctx: Any) -> str:
    """Progress, two log lines on two streams and two summary patches."""
    ctx.progress(1, total=4, message="first row")
    ctx.progress(3, total=4, message="third row")
    ctx.log("exported rows 1-3", stream="stdout")
    ctx.log("row 2 had no price", stream="stderr")
    ctx.summary({"rows": 3, "feed": {"url": "s3://feeds/1", "draft": True}})
    ctx.summary({"feed": {"draft": None}})
    return "exported"


class Export(Workflow):
    name = "live_contract_export"
    export = Task(f"{HERE}.reports")


class Held(Workflow):
    name = "live_contract_held"
    review = Gate(prompt="go?")


def test_progress_logs_and_summary_read_back_by_their_names():
    run = workflows.start_run(Export)
    run_pending()
    assert workflows.wait_for(run, timeout=5).status == "completed"
    step = Step.objects.get(run=run, name="export")
    assert (step.progress_done, step.progress_total, step.progress_message) == (
        3.0,
        4.0,
        "third row",
    )
    assert step.summary == {"rows": 3, "feed": {"url": "s3://feeds/1"}}
    assert step.summary_version == 2
    every = workflows.frames(step, after=None, limit=10)
    assert [(frame.seq, frame.stream, frame.text) for frame in every] == [
        (1, "stdout", "exported rows 1-3"),
        (2, "stderr", "row 2 had no price"),
    ]
    assert all(frame.at is not None for frame in every)
    assert [frame.text for frame in workflows.frames(step, after=1, limit=10)] == [
        "row 2 had no price"
    ]
    assert [frame.seq for frame in workflows.frames(step, stream="stderr")] == [2]


def test_wait_for_gives_up_with_wait_timeout_on_a_run_that_does_not_end():
    run = workflows.start_run(Held)
    with pytest.raises(workflows.WaitTimeout):
        workflows.wait_for(run, timeout=0.2)


def test_wait_for_events_then_consume_and_ack():
    run = workflows.start_run(Held)
    first = workflows.wait_for_events(run, after=None, timeout=5)
    assert first and first[0].type == "run.started"
    assert workflows.wait_for_events(run, after=first[-1].id, timeout=0) == []

    workflows.cancel_run(run.pk)
    later = workflows.wait_for_events(run, after=first[-1].id, timeout=5)
    assert "run.cancelled" in [event.type for event in later]

    # At least once: until acknowledged, the consumer gets the same events again.
    events = workflows.consume("live-contract", limit=100, wait=5)
    assert events and all(event.id and event.cursor for event in events)
    assert [event.id for event in workflows.consume("live-contract", limit=100)] == [
        event.id for event in events
    ]
    acked = workflows.ack("live-contract", events[0].cursor)
    assert acked.moved
    assert [event.id for event in workflows.consume("live-contract", limit=100)] == [
        event.id for event in events[1:]
    ]
