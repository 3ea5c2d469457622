"""Saga compensation and cancel: reverse order, exactly once, resumable, recorded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

import workflows
from tests.support.runs import run_inline
from workflows import FanOut, Gate, PermanentError, Retry, Task, Workflow
from workflows.engine import COMPENSATION, ITEM, claim
from workflows.models import CompensationRecord, FanOutItem
from workflows.testing import run_pending
from workflows.workers.scanners import reclaim_expired_leases

pytestmark = pytest.mark.django_db

HERE = "tests.engine.nodes.test_compensation"
UNDONE: list[tuple[str, object, object]] = []
FAIL_UNDO: set[str] = set()


def book(ctx):
    return f"booking-{ctx.step_name}"


def undo(ctx):
    if ctx.step_name in FAIL_UNDO:
        FAIL_UNDO.discard(ctx.step_name)
        raise PermanentError(f"cannot undo {ctx.step_name} yet")
    UNDONE.append((ctx.step_name, ctx.compensated_output, ctx.input.get("trip")))
    return None


def charge(ctx):
    raise PermanentError("card declined")


def ship(ctx):
    return f"parcel-{ctx.item}"


@pytest.fixture(autouse=True)
def _reset():
    UNDONE.clear()
    FAIL_UNDO.clear()


ONCE = Retry(max_attempts=1)


class Trip(Workflow):
    name = "saga_trip"
    flight = Task(f"{HERE}.book", compensate=f"{HERE}.undo", retry=ONCE)
    hotel = Task(f"{HERE}.book", compensate=f"{HERE}.undo", retry=ONCE)
    car = Task(f"{HERE}.book", compensate=f"{HERE}.undo", retry=ONCE)
    pay = Task(f"{HERE}.charge", retry=ONCE)


class Approved(Workflow):
    name = "saga_approved"
    reserve = Task(f"{HERE}.book", compensate=f"{HERE}.undo")
    approval = Gate(prompt="go?", timeout=timedelta(days=1))
    after = Task(f"{HERE}.book")


class Shipment(Workflow):
    name = "saga_shipment"
    ship = FanOut(
        f"{HERE}.ship", items=lambda ctx: list(range(6)), max_parallel=2, compensate=f"{HERE}.undo"
    )


def test_failure_compensates_completed_steps_in_reverse_order():
    run = run_inline(Trip, {"trip": "T-1"})
    assert run.status == "compensated"
    assert run.error["step"] == "pay"
    assert UNDONE == [
        ("car", "booking-car", "T-1"),
        ("hotel", "booking-hotel", "T-1"),
        ("flight", "booking-flight", "T-1"),
    ]
    records = list(CompensationRecord.objects.filter(run=run).order_by("sequence"))
    assert [(r.step.name, r.sequence, r.status) for r in records] == [
        ("flight", 1, "completed"),
        ("hotel", 2, "completed"),
        ("car", 3, "completed"),
    ]
    types = list(run.events.values_list("type", flat=True))
    assert types.index("run.compensating") < types.index("run.compensated")


def test_a_compensation_failing_midway_stops_then_resumes_exactly_once():
    FAIL_UNDO.add("flight")  # the third compensation fails after two succeeded
    run = run_inline(Trip, {"trip": "T-2"})
    assert run.status == "compensation_failed"
    assert [name for name, *_ in UNDONE] == ["car", "hotel"]
    failed = CompensationRecord.objects.get(run=run, status="failed")
    assert failed.step.name == "flight"
    user = User.objects.create_user("operator")
    workflows.retry_run(run, user=user)
    run_pending()
    run.refresh_from_db()
    assert run.status == "compensated"
    assert [name for name, *_ in UNDONE] == ["car", "hotel", "flight"]
    assert set(CompensationRecord.objects.filter(run=run).values_list("status", flat=True)) == {
        "completed"
    }
    assert run.events.filter(type="compensations.retried", payload__by="operator").exists()


def test_a_compensation_whose_worker_died_is_reclaimed_and_runs_once():
    run = workflows.start_run(Trip, {"trip": "T-3"})
    run_pending(max_rounds=1)  # flight, hotel, car complete (chained), pay fails
    run.refresh_from_db()
    assert run.status == "compensating"
    record = CompensationRecord.objects.get(run=run, status="ready")
    claim(COMPENSATION, record.pk, "doomed-worker")  # the worker dies here
    reclaim_expired_leases(now=timezone.now() + timedelta(hours=1))
    run_pending()
    run.refresh_from_db()
    assert run.status == "compensated"
    assert [name for name, *_ in UNDONE] == ["car", "hotel", "flight"]
    assert CompensationRecord.objects.get(pk=record.pk).attempt == 2


def test_cancel_during_a_gate_cancels_it_and_compensates():
    run = workflows.start_run(Approved)
    run_pending()
    user = User.objects.create_user("operator")
    run = workflows.cancel_run(run, reason="customer changed mind", user=user)
    assert run.status == "cancelling"
    assert run.steps.get(name="approval").status == "cancelled"
    assert not run.timers.filter(status="scheduled").exists()
    run_pending()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert run.error == {"code": "cancelled", "message": "customer changed mind", "by": "operator"}
    assert [name for name, *_ in UNDONE] == ["reserve"]
    again = workflows.cancel_run(run, reason="once more")  # idempotent: nothing changes
    assert (again.status, again.version, again.error) == ("cancelled", run.version, run.error)


def test_cancel_without_compensation_skips_the_records():
    run = workflows.start_run(Approved)
    run_pending()
    workflows.cancel_run(run, compensate=False)
    run_pending()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert UNDONE == []
    assert CompensationRecord.objects.get(run=run).status == "skipped"


def test_cancel_during_a_fanout_lets_running_items_finish_then_compensates():
    run = workflows.start_run(Shipment)
    step = run.steps.get()
    running = claim(ITEM, FanOutItem.objects.filter(step=step, status="ready").first().pk, "w")
    workflows.cancel_run(run, reason="stop")
    statuses = dict(FanOutItem.objects.filter(step=step).values_list("index", "status"))
    assert statuses == {
        0: "running",
        1: "skipped",
        2: "skipped",
        3: "skipped",
        4: "skipped",
        5: "skipped",
    }
    run.refresh_from_db()
    assert run.status == "cancelling"  # waits for the running item
    workflows.engine.complete_work(running, "parcel-0")
    run_pending()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert UNDONE == [("ship", "parcel-0", None)]
    step.refresh_from_db()
    assert (step.items_completed, step.items_skipped) == (1, 5)
