"""Set-based updates restate the state each row must still have (the compare-and-set rule).

A claim does not take the run lock, so on PostgreSQL (READ COMMITTED) a step can be
claimed between the moment a cancelling transition reads the run's unstarted steps and
the moment it updates them. The update must then leave the claimed step alone: its
handler is running, its result must be recorded and its compensation written.

The PostgreSQL test interleaves two real connections with barriers; SQLite serialises
every writer (``BEGIN IMMEDIATE``), so there the claim can only come before or after the
cancel, and both orders are checked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

import workflows
from tests.support.database import is_sqlite
from tests.support.runs import claimed
from tests.support.threads import THREAD_TIMEOUT_SECONDS, run_concurrently
from workflows import Task, Workflow
from workflows.engine import claim_step, complete_work
from workflows.models import CompensationRecord, Event, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)

NOOP = "tests.engine.sql.test_set_based_updates.noop"
UNDO = "tests.engine.sql.test_set_based_updates.undo"


def noop(ctx: Any) -> str:
    return "done"


def undo(ctx: Any) -> str:
    return f"undid {ctx.compensated_output}"


class TwoBranches(Workflow):
    """``work`` and ``other`` both start at once: cancelling stops ``other``, not ``work``."""

    name = "set_based_two_branches"
    work = Task(NOOP, compensate=UNDO)
    other = Task(NOOP, after=[])


def _pause_before_first_step_update(
    reached: threading.Event, release: threading.Event
) -> Callable[..., Any]:
    """An execute wrapper that holds this connection just before it updates steps."""

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any):
        if (
            not reached.is_set()
            and sql.lstrip().upper().startswith("UPDATE")
            and (Step._meta.db_table in sql)
        ):
            reached.set()
            assert release.wait(THREAD_TIMEOUT_SECONDS), "the claim never finished"
        return execute(sql, params, many, context)

    return wrapper


def _assert_claimed_work_survives_cancel(run: Run, lease: Any) -> None:
    work = Step.objects.get(run=run, name="work")
    assert (work.status, work.attempt) == ("running", 1)
    other = Step.objects.get(run=run, name="other")
    assert other.status == "cancelled"
    cancelled = Event.objects.filter(run=run, type="step.cancelled")
    assert [event.step_id for event in cancelled] == [other.pk]

    complete_work(lease, "done")  # the handler's result is recorded, not rejected
    work.refresh_from_db()
    assert (work.status, work.output) == ("completed", "done")
    assert CompensationRecord.objects.filter(run=run, step=work).count() == 1
    run_pending()
    run.refresh_from_db()
    assert run.status == "cancelled"
    record = CompensationRecord.objects.get(run=run)
    assert (record.status, record.output) == ("completed", "undid done")
    assert not Event.objects.filter(run=run, type="lease.lost").exists()


def test_postgres_claim_between_read_and_update_of_cancel_is_not_overwritten():
    if is_sqlite():
        pytest.skip("SQLite serialises writers: a claim cannot interleave with a cancel")
    run = workflows.start_run(TwoBranches)
    work_id = Step.objects.get(run=run, name="work").pk
    reached, released = threading.Event(), threading.Event()
    claimed: dict[str, Any] = {}

    def cancel() -> None:
        with connection.execute_wrapper(_pause_before_first_step_update(reached, released)):
            workflows.cancel_run(run, reason="operator")

    def claim() -> None:
        try:
            assert reached.wait(THREAD_TIMEOUT_SECONDS), "the cancel never reached its update"
            claimed["lease"] = claim_step(work_id, "racing-worker")
        finally:
            released.set()

    results = run_concurrently(cancel, claim)
    assert results == [None, None], results
    _assert_claimed_work_survives_cancel(run, claimed["lease"])


def test_claim_before_cancel_keeps_running_work_on_every_database():
    run = workflows.start_run(TwoBranches)
    lease = claimed(run, "work", "worker")
    workflows.cancel_run(run, reason="operator")
    run.refresh_from_db()
    assert run.status == "cancelling"
    _assert_claimed_work_survives_cancel(run, lease)


def test_claim_after_cancel_finds_nothing_to_claim():
    run = workflows.start_run(TwoBranches)
    workflows.cancel_run(run, reason="operator")
    work = Step.objects.get(run=run, name="work")
    with pytest.raises(workflows.StaleState):
        claim_step(work.pk, "late-worker")
    assert work.status == "cancelled"
