"""Same-transaction business writes: a transactional handler's own ORM writes commit with
its step's completion, and roll back with it.

The host's row here is ``LedgerEntry`` (tests/acceptance/flowapp): whatever a handler
wrote must be there exactly when the attempt that wrote it was recorded as completed.
The real-process cases (a worker killed between its write and its completion, a stale
worker on another connection) are in ``tests/acceptance/test_transactional_writes.py``.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

import workflows
from tests.acceptance.flowapp.models import LedgerEntry, Order
from tests.support.runs import run_inline
from tests.support.workflows import Held
from workflows import (
    Await,
    DefinitionError,
    FanOut,
    PermanentError,
    Retry,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.context import Context
from workflows.engine import STEP, claim
from workflows.models import Run
from workflows.testing import run_pending
from workflows.workers.runner import run_attempt
from workflows.workers.scanners import reclaim_expired_leases

pytestmark = pytest.mark.django_db

HERE = "tests.engine.runs.test_transactional_handlers"
TWICE = Retry(max_attempts=2, initial_interval=timedelta(seconds=1))


class Refused(Exception):
    """A failure planned by the test."""


def write_entry(ctx: Context, *, item: str = "") -> None:
    LedgerEntry.objects.create(
        run_id=ctx.run_id,
        step_name=ctx.step_name,
        item=item,
        attempt=ctx.attempt,
        pid=os.getpid(),
    )


def book(ctx: Context) -> dict:
    """Write the entry, then do what ``input`` plans for this attempt."""
    plan = ctx.input.get("plan", {}).get(str(ctx.attempt), [])
    if "heartbeat" in plan:
        ctx.heartbeat()
    write_entry(ctx)
    if "raise" in plan:
        raise Refused(f"attempt {ctx.attempt} refused after writing")
    if "nan" in plan:
        return {"amount": float("nan")}
    return {"attempt": ctx.attempt}


def book_item(ctx: Context) -> str:
    write_entry(ctx, item=str(ctx.item))
    if ctx.item in ctx.input.get("bad_items", []):
        raise PermanentError(f"item {ctx.item} refused after writing")
    return f"booked {ctx.item}"


def unbook(ctx: Context) -> None:
    write_entry(ctx, item="undo")
    if ctx.attempt == 1:
        raise Refused("the first undo attempt fails after writing")


def ask_partner(ctx: Context):
    write_entry(ctx)
    return ctx.await_callback(timedelta(hours=1))


TOKENS: list[str] = []


def ask_mapping(ctx: Context):
    write_entry(ctx)
    if ctx.resumed is None:
        return Await("mapping")
    return ctx.resumed["payload"]


def ask_bank(ctx: Context):
    handle = ctx.await_callback(timedelta(hours=1))
    TOKENS.append(handle.token)
    return handle


def decline(ctx: Context) -> None:
    raise PermanentError("declined")


def items(ctx: Context) -> list[str]:
    return ["a", "b", "c"]


class Booking(Workflow):
    name = "tx_booking"
    book = Task(f"{HERE}.book", transactional=True, retry=TWICE)


class Batch(Workflow):
    name = "tx_batch"
    lines = FanOut(
        f"{HERE}.book_item", items=items, transactional=True, tolerated_failures=1, retry=TWICE
    )


class Undone(Workflow):
    name = "tx_undone"
    book = Task(f"{HERE}.book", transactional=True, compensate=f"{HERE}.unbook", retry=TWICE)
    pay = Task(f"{HERE}.decline")


class Partner(Workflow):
    name = "tx_partner"
    ask = Task(f"{HERE}.ask_partner", transactional=True)


class Mapping(Workflow):
    name = "tx_mapping"
    ask = Task(f"{HERE}.ask_mapping", transactional=True, awaits=["mapping"])


class Asked(Workflow):
    name = "tx_asked"
    ask = Task(f"{HERE}.ask_bank")


class Paid(Workflow):
    name = "tx_paid"
    paid = WaitForSignal("paid")


def entries(run: Run) -> list[tuple[str, str, int]]:
    rows = LedgerEntry.objects.filter(run_id=run.pk)
    return list(rows.values_list("step_name", "item", "attempt"))


def later() -> timezone.datetime:
    return timezone.now() + timedelta(minutes=10)


def test_the_handlers_write_commits_with_the_completion():
    run = run_inline(Booking)
    assert run.status == "completed"
    assert run.steps.get(name="book").output == {"attempt": 1}
    assert entries(run) == [("book", "", 1)]


def test_a_failed_attempt_rolls_back_its_write_and_the_retry_writes_once():
    run = workflows.start_run(Booking, {"plan": {"1": ["raise"]}})
    run_pending()
    step = run.steps.get(name="book")
    assert step.status == "retry_scheduled"
    assert step.error["message"] == "attempt 1 refused after writing"
    assert entries(run) == []

    run_pending(until=later())
    step.refresh_from_db()
    assert (step.status, step.attempt) == ("completed", 2)
    assert entries(run) == [("book", "", 2)]


def test_an_output_the_database_cannot_store_rolls_back_the_write():
    run = workflows.start_run(Booking, {"plan": {"1": ["nan"]}})
    run_pending()
    step = run.steps.get(name="book")
    assert step.status == "failed"
    assert "NaN" in step.error["message"]
    assert entries(run) == []


def test_a_heartbeat_in_a_failed_attempt_is_undone_with_it_and_the_failure_recorded():
    """The heartbeat's write is rolled back with the attempt: the failure that follows is
    fenced by the lease as it was before the heartbeat, and lands."""
    run = workflows.start_run(Booking, {"plan": {"1": ["heartbeat", "raise"]}})
    run_pending()
    step = run.steps.get(name="book")
    assert (step.status, step.attempt) == ("retry_scheduled", 1)
    assert entries(run) == []
    assert not run.events.filter(type="lease.lost").exists()

    run_pending(until=later())
    step.refresh_from_db()
    assert (step.status, step.attempt) == ("completed", 2)
    assert entries(run) == [("book", "", 2)]


def test_a_stale_workers_write_is_rolled_back_with_its_rejected_completion():
    run = workflows.start_run(Booking)
    step = run.steps.get(name="book")
    stale = claim(STEP, step.pk, "worker-a")
    assert reclaim_expired_leases(now=later()).done == 1
    fresh = claim(STEP, step.pk, "worker-b")

    assert run_attempt(fresh, chain=False) is None
    assert run_attempt(stale, chain=False) is None  # logged, never raised

    step.refresh_from_db()
    assert (step.status, step.attempt, step.output) == ("completed", 2, {"attempt": 2})
    assert entries(run) == [("book", "", 2)]
    lost = run.events.get(type="lease.lost")
    assert (lost.payload["action"], lost.payload["attempt"]) == ("completion", 1)
    assert lost.payload["current"]["status"] == "completed"


def test_a_stale_worker_whose_heartbeat_is_refused_leaves_nothing():
    """Its attempt was taken back for expiry: the heartbeat is refused (``LeaseExpired``),
    the handler's writes roll back, and the reclaim's ``lease.expired`` is the record."""
    run = workflows.start_run(Booking, {"plan": {"1": ["heartbeat"]}})
    step = run.steps.get(name="book")
    stale = claim(STEP, step.pk, "worker-a")
    reclaim_expired_leases(now=later())

    run_attempt(stale, chain=False)

    assert entries(run) == []
    assert not run.events.filter(type="lease.lost").exists()
    expired = run.events.get(type="lease.expired")
    assert (expired.payload["attempt"], expired.payload["owner"]) == (1, "worker-a")
    step.refresh_from_db()
    assert (step.status, step.attempt) == ("ready", 1)  # reclaimed: the next attempt is due


def test_each_fan_out_item_commits_its_write_with_its_own_completion():
    run = run_inline(Batch, {"bad_items": ["b"]}, until=later())
    assert run.status == "completed"
    assert sorted(entries(run)) == [("lines", "a", 1), ("lines", "c", 1)]
    assert run.steps.get(name="lines").output == ["booked a", None, "booked c"]


def test_a_transactional_compensation_commits_its_undo_once():
    run = workflows.start_run(Undone)
    run_pending(until=later())
    run_pending(until=later() + timedelta(minutes=10))
    run.refresh_from_db()
    assert run.status == "compensated"
    assert entries(run) == [("book", "", 1), ("book", "undo", 2)]


def test_parking_behind_a_callback_commits_the_write_with_the_wait():
    run = workflows.start_run(Partner)
    run_pending()
    assert run.steps.get(name="ask").status == "waiting"
    assert entries(run) == [("ask", "", 1)]


def test_an_await_commits_the_write_with_the_wait_and_the_resumed_attempt_writes_again():
    run = workflows.start_run(Mapping)
    run_pending()
    assert run.steps.get(name="ask").status == "waiting"
    assert entries(run) == [("ask", "", 1)]
    workflows.send_signal(run, "mapping", "m")
    run_pending()
    run.refresh_from_db()
    assert run.output == {"ask": "m"}
    assert entries(run) == [("ask", "", 1), ("ask", "", 2)]


def test_app_code_commits_its_write_with_a_start_or_rolls_back_both():
    with pytest.raises(Refused), transaction.atomic():
        order = Order.objects.create(number="A-1")
        workflows.start_run(Booking, subject=order)
        raise Refused("the view failed after starting the run")
    assert not Order.objects.exists()
    assert not Run.objects.exists()

    with transaction.atomic():
        order = Order.objects.create(number="A-2")
        run = workflows.start_run(Booking, subject=order)
    assert list(Run.objects.for_object(order)) == [run]


def test_app_code_commits_its_write_with_a_gate_decision_or_rolls_back_both():
    approver = User.objects.create_user("approver")
    run = workflows.start_run(Held)
    run_pending()
    gate = run.steps.get(name="approve")
    with pytest.raises(Refused), transaction.atomic():
        Order.objects.create(number="B-1")
        workflows.approve_gate(gate.pk, user=approver)
        raise Refused("the view failed after approving")
    gate.refresh_from_db()
    assert gate.status == "waiting"
    assert not Order.objects.exists()

    with transaction.atomic():
        Order.objects.create(number="B-2")
        workflows.approve_gate(gate.pk, user=approver)
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert Order.objects.get().number == "B-2"


def complete_the_callback(run: Run) -> None:
    workflows.complete_callback(TOKENS[-1], {"reference": "TX-1"})


def send_the_signal(run: Run) -> None:
    workflows.send_signal(run, "paid", {"amount": 10})


@pytest.mark.parametrize(
    ("workflow", "move_on"), [(Asked, complete_the_callback), (Paid, send_the_signal)]
)
def test_app_code_commits_its_write_with_a_callback_or_a_signal_or_rolls_back_both(
    workflow, move_on
):
    run = workflows.start_run(workflow)
    run_pending()
    waiting = run.steps.get()
    assert waiting.status == "waiting"

    with pytest.raises(Refused), transaction.atomic():
        Order.objects.create(number="C-1")
        move_on(run)
        raise Refused("the view failed after moving the run on")
    run_pending()
    waiting.refresh_from_db()
    assert waiting.status == "waiting"
    assert not Order.objects.exists()

    with transaction.atomic():
        Order.objects.create(number="C-2")
        move_on(run)
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert Order.objects.get().number == "C-2"


@pytest.mark.parametrize(
    ("node", "problem"),
    [
        (lambda: Task(f"{HERE}.book", transactional="yes"), "transactional must be True or False"),
        (
            lambda: FanOut(items=items, workflow="tx_booking", transactional=True),
            "transactional= applies to handler items",
        ),
    ],
)
def test_a_bad_transactional_flag_is_a_definition_error(node, problem):
    with pytest.raises(DefinitionError, match=problem):
        type("Bad", (Workflow,), {"name": "tx_bad", "step": node(), "__module__": HERE})
