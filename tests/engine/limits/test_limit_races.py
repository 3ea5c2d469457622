"""Limits under concurrent claims, with real connections committing for real.

A concurrency slot and a rate limit are taken in the claim's own transaction. On
PostgreSQL two claims run at once: the slot or bucket one of them read is locked by
its read, so the other moves past it (slots) or waits for it (buckets) and sees the
first claim's start. These tests interleave the two transactions by hand.
"""

from __future__ import annotations

import threading
from functools import partial

import pytest
from django.db import connections, transaction

import workflows
from tests.support.database import is_sqlite
from tests.support.handlers import NOOP
from tests.support.threads import THREAD_TIMEOUT_SECONDS
from workflows import Task, Workflow
from workflows.definitions.limits import RateLimit
from workflows.engine import claim_step, complete_work
from workflows.engine.limits import rates
from workflows.engine.sql.connection import engine_alias
from workflows.errors import WorkHeld
from workflows.models import ConcurrencySlot, Step

pytestmark = pytest.mark.django_db(transaction=True)

INTERLEAVING = "SQLite serialises writers (BEGIN IMMEDIATE): no two claims interleave"


def one_key(ctx):
    return "shared-account"


def one_place(ctx):
    return "one-place"


class OnePlace(Workflow):
    name = "race_limits_one_place"
    call = Task(NOOP, concurrency_key=one_place)


class Shared(Workflow):
    name = "race_limits_shared"
    call = Task(NOOP, concurrency_key=one_key, max_concurrent=2)


def test_concurrent_claims_never_exceed_max_concurrent(concurrently):
    runs = [workflows.start_run(Shared, {}) for _ in range(8)]
    step_ids = [Step.objects.get(run=run).pk for run in runs]
    results = concurrently(*(partial(claim_step, pk, f"worker-{pk}") for pk in step_ids))
    started = [result for result in results if not isinstance(result, Exception)]
    held = [result for result in results if isinstance(result, WorkHeld)]
    assert len(started) == 2, results
    assert len(held) == 6, results
    holders = ConcurrencySlot.objects.exclude(holder_kind="").values_list("holder_id", flat=True)
    assert sorted(holders) == sorted(lease.unit_id for lease in started)


def _in_open_transaction(work, opened: threading.Event, finish: threading.Event, out: list):
    """Run ``work`` in a transaction left open until ``finish`` is set."""
    try:
        with transaction.atomic(using=engine_alias()):
            out.append(work())
            opened.set()
            assert finish.wait(THREAD_TIMEOUT_SECONDS)
    finally:
        opened.set()
        connections.close_all()


def test_a_slot_taken_by_an_uncommitted_claim_is_not_taken_again():
    if is_sqlite():
        pytest.skip(INTERLEAVING)
    warm, first, second = (workflows.start_run(OnePlace, {}) for _ in range(3))
    complete_work(claim_step(Step.objects.get(run=warm).pk, "warm-up"), None)  # slots exist
    opened, finish, out = threading.Event(), threading.Event(), []
    thread = threading.Thread(
        target=_in_open_transaction,
        args=(partial(claim_step, Step.objects.get(run=first).pk, "a"), opened, finish, out),
    )
    thread.start()
    assert opened.wait(THREAD_TIMEOUT_SECONDS)
    try:
        # The first claim holds the slot's row, uncommitted: this one skips it, finds
        # no free slot, and holds its step.
        with pytest.raises(WorkHeld):
            claim_step(Step.objects.get(run=second).pk, "b")
    finally:
        finish.set()
        thread.join(THREAD_TIMEOUT_SECONDS)
    assert [lease.owner for lease in out] == ["a"]
    slot = ConcurrencySlot.objects.get(key="one-place")
    assert (slot.holder_kind, slot.holder_id) == ("step", Step.objects.get(run=first).pk)


def test_a_rate_limits_last_start_is_taken_once_by_two_open_claims():
    if is_sqlite():
        pytest.skip(INTERLEAVING)
    rate = RateLimit.parse("1/h")
    opened, finish, out = threading.Event(), threading.Event(), []
    thread = threading.Thread(
        target=_in_open_transaction,
        args=(partial(rates.take, [("other", rate)]), opened, finish, out),
    )
    thread.start()
    assert opened.wait(THREAD_TIMEOUT_SECONDS)
    waiter_result: list = []

    def second_claim() -> None:
        try:
            with transaction.atomic(using=engine_alias()):
                waiter_result.append(rates.take([("other", rate)]))
        finally:
            connections.close_all()

    waiter = threading.Thread(target=second_claim)
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive(), "the second claim must wait for the first's bucket lock"
    finish.set()
    thread.join(THREAD_TIMEOUT_SECONDS)
    waiter.join(THREAD_TIMEOUT_SECONDS)
    assert out == [None]
    [(key, wait)] = waiter_result
    assert key == "other" and wait > 3500
