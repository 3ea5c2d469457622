"""Telemetry everywhere a handler runs: ``ctx.progress``, ``ctx.log`` and ``ctx.summary``
in a fan-out item's and a compensation's handler write to the item's or compensation's
row, fenced by its attempt and owner as a step's are: a stale attempt's write is refused
with ``LeaseLost`` and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

import workflows
from workflows import FanOut, LeaseLost, Retry, Task, Workflow
from workflows.engine import claim
from workflows.engine.telemetry.unit_log import UNIT_FRAMES
from workflows.engine.work_kinds import COMPENSATION, ITEM
from workflows.models import CompensationRecord, FanOutItem
from workflows.testing import run_pending
from workflows.workers.telemetry import AttemptTelemetry

pytestmark = pytest.mark.django_db

HERE = __name__


def ships(ctx: Any) -> str:
    ctx.progress(1, 2, f"shipping {ctx.item}")
    ctx.log(f"packed {ctx.item}")
    ctx.summary({"item": ctx.item, "tmp": 1})
    ctx.summary({"tmp": None})
    ctx.log("sent", stream="stderr")
    ctx.progress(2, 2, "shipped")
    return ctx.item


def books(ctx: Any) -> str:
    return "booked"


def undoes(ctx: Any) -> None:
    ctx.progress(1, 1, "refunded")
    ctx.log(f"refunding {ctx.compensated_output}")
    ctx.summary({"refunded": ctx.compensated_output})


def chatty(ctx: Any) -> None:
    for line in range(UNIT_FRAMES + 5):
        ctx.log(f"line {line}")


class Shipping(Workflow):
    name = "unit_telemetry_shipping"
    ship = FanOut(f"{HERE}.ships", items=lambda ctx: ["a", "b"], key=lambda item: item)


class Chatty(Workflow):
    name = "unit_telemetry_chatty"
    each = FanOut(f"{HERE}.chatty", items=lambda ctx: ["x"], key=lambda item: item)


class Undoing(Workflow):
    name = "unit_telemetry_undoing"
    book = Task(f"{HERE}.books", compensate=f"{HERE}.undoes")
    then = Task("tests.support.handlers.boom", retry=Retry(max_attempts=1))


def test_fan_out_items_report_progress_log_and_summary_on_their_rows():
    run = workflows.start_run(Shipping)
    run_pending()
    items = {item.key: item for item in FanOutItem.objects.filter(step__run=run)}
    a = items["a"]
    assert a.status == "completed"
    assert (a.progress_done, a.progress_total, a.progress_message) == (2, 2, "shipped")
    assert a.progress_at is not None
    assert a.summary == {"item": "a"} and a.summary_version == 2
    assert [(f["seq"], f["attempt"], f["stream"], f["text"]) for f in a.log] == [
        (1, 1, "stdout", "packed a"),
        (2, 1, "stderr", "sent"),
    ]
    assert a.frames_written == 2 and a.frames_dropped == 0
    assert items["b"].summary == {"item": "b"}


def test_a_compensation_reports_on_its_record():
    run = workflows.start_run(Undoing)
    run_pending()
    record = CompensationRecord.objects.get(run=run)
    assert record.status == "completed"
    assert record.progress_message == "refunded"
    assert record.summary == {"refunded": "booked"}
    assert [f["text"] for f in record.log] == ["refunding booked"]


def test_a_units_log_keeps_its_newest_frames_and_counts_the_rest():
    run = workflows.start_run(Chatty)
    run_pending()
    item = FanOutItem.objects.get(step__run=run)
    assert len(item.log) == UNIT_FRAMES
    assert item.log[0]["text"] == "line 5" and item.log[-1]["seq"] == UNIT_FRAMES + 5
    assert (item.frames_written, item.frames_dropped) == (UNIT_FRAMES + 5, 5)


def test_a_stale_item_attempt_cannot_write_into_the_new_one():
    run = workflows.start_run(Shipping)
    item = FanOutItem.objects.get(step__run=run, key="a")
    old = claim(ITEM, item.pk, "wedged-worker")
    stale = AttemptTelemetry(old)
    stale.progress(1, 2, "stale")
    stale.log("stale line")
    fresh = FanOutItem.objects.get(pk=item.pk)
    assert workflows.revoke_lease(fresh, expected_attempt=fresh.attempt).revoked
    new = claim(ITEM, item.pk, "healthy-worker")
    assert new.attempt == 2
    fresh = AttemptTelemetry(new)
    fresh.summary({"fresh": True})
    fresh.log("fresh line")
    fresh.flush()
    with pytest.raises(LeaseLost):
        stale.flush()
    with pytest.raises(LeaseLost):  # and every later call, without a write
        stale.summary({"stale": True})
    row = FanOutItem.objects.get(pk=item.pk)
    assert row.summary == {"fresh": True}
    assert row.progress_message == ""
    assert [(f["attempt"], f["text"]) for f in row.log] == [(2, "fresh line")]
    # the fresh attempt's fence still holds: its heartbeat extends the lease
    fresh.heartbeat()
    assert FanOutItem.objects.get(pk=item.pk).version == new.version


def test_a_stale_compensation_attempt_cannot_write_into_the_new_one():
    run = workflows.start_run(Undoing)
    run_pending(max_rounds=1)
    record = CompensationRecord.objects.get(run=run)
    if record.status != "ready":
        pytest.skip(f"compensation is {record.status}")
    old = claim(COMPENSATION, record.pk, "wedged-worker")
    stale = AttemptTelemetry(old)
    stale.progress(1, 1, "stale")
    fresh = CompensationRecord.objects.get(pk=record.pk)
    assert workflows.revoke_lease(fresh, expected_attempt=fresh.attempt).revoked
    new = claim(COMPENSATION, record.pk, "healthy-worker")
    fresh = AttemptTelemetry(new)
    fresh.progress(1, 1, "fresh")
    fresh.flush()
    with pytest.raises(LeaseLost):
        stale.flush()
    assert CompensationRecord.objects.get(pk=record.pk).progress_message == "fresh"
