"""Batched fan-out (``FanOut(batch_size=N)``): several items per transaction, every
guarantee of an item kept.

A worker claims up to N ready items in one statement, runs their handlers one after
another and records all outcomes in one transaction. These tests hold the promises an
unbatched item makes: its result is recorded once, under its own idempotency key; a lost
lease rejects that item alone; failures retry per item and count against tolerance;
``max_parallel`` bounds the items in hand; two claimers never take the same item.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone

import workflows
from tests.support.database import is_sqlite
from tests.support.runs import run_inline
from tests.support.threads import THREAD_TIMEOUT_SECONDS, run_concurrently
from workflows import DefinitionError, FanOut, PermanentError, Retry, Task, Workflow
from workflows.engine import ITEM, claim, reclaim
from workflows.engine.lease import LeaseBatch
from workflows.models import Event, FanOutItem
from workflows.status import StepStatus
from workflows.testing import run_pending
from workflows.workers.runner import run_attempt

pytestmark = pytest.mark.django_db

HERE = "tests.engine.nodes.test_fanout_batches"
SEEN: list[tuple[Any, str, int]] = []
IN_HAND: list[int] = []
ACTIONS: dict[Any, Any] = {}


@pytest.fixture(autouse=True)
def _reset():
    SEEN.clear()
    IN_HAND.clear()
    ACTIONS.clear()


def record(ctx):
    """Note the call; count the step's items in hand; then do what ``ACTIONS`` says."""
    SEEN.append((ctx.item, ctx.idempotency_key, ctx.attempt))
    IN_HAND.append(
        FanOutItem.objects.filter(
            step__run_id=ctx.run_id,
            status__in=(StepStatus.READY, StepStatus.RUNNING, StepStatus.WAITING),
        ).count()
    )
    action = ACTIONS.get(ctx.item)
    if action is not None:
        action(ctx)
    return ctx.item * 10


def broken(ctx):
    raise PermanentError(f"cannot handle {ctx.item}")


def total(ctx):
    return sum(output or 0 for output in ctx.steps["fan"].output)


def items(ctx):
    return list(range(ctx.input["n"]))


def batched(name: str, *, batch_size: int = 4, max_parallel: int = 8, **options: Any):
    body = {
        "fan": FanOut(
            f"{HERE}.record",
            items=items,
            max_parallel=max_parallel,
            batch_size=batch_size,
            retry=options.pop("retry", Retry(max_attempts=1)),
            **options,
        ),
        "sum_up": Task(f"{HERE}.total"),
    }
    return type(name.title(), (Workflow,), {"__module__": __name__, "name": name, **body})


BATCHED = batched("batch_plain")
TOLERANT = batched("batch_tolerant", tolerated_failures=1)
RETRIED = batched(
    "batch_retried", retry=Retry(max_attempts=3, initial_interval=timedelta(seconds=5))
)


def ready_items(run) -> list[FanOutItem]:
    return list(FanOutItem.objects.filter(step__run=run, status="ready").order_by("index"))


def item_events(run, type: str) -> list[str]:
    return [e.payload["item"] for e in Event.objects.filter(run=run, type=type).order_by("id")]


def test_a_claim_takes_a_batch_of_ready_items_each_with_its_own_lease():
    run = workflows.start_run(BATCHED, {"n": 20})
    nudged = ready_items(run)[6]  # the item the queue message named is taken first
    batch = claim(ITEM, nudged.pk, "w")
    assert isinstance(batch, LeaseBatch)
    assert [lease.item_key for lease in batch.leases] == ["0", "1", "2", "6"]  # item order
    assert {lease.attempt for lease in batch.leases} == {1}
    assert [lease.idempotency_key for lease in batch.leases] == [
        f"{run.pk}/fan/{key}" for key in ("0", "1", "2", "6")
    ]
    rows = FanOutItem.objects.filter(step__run=run, status="running")
    assert sorted(rows.values_list("key", flat=True)) == ["0", "1", "2", "6"]
    assert set(rows.values_list("lease_owner", flat=True)) == {"w"}
    assert sorted(item_events(run, "item.started")) == ["0", "1", "2", "6"]


def test_batch_results_are_recorded_once_in_item_order_under_the_unbatched_keys():
    run = run_inline(BATCHED, {"n": 30})
    step = run.steps.get(name="fan")
    assert (run.status, step.status) == ("completed", "completed")
    assert step.output == [i * 10 for i in range(30)]
    assert (step.items_completed, step.items_failed, step.items_skipped) == (30, 0, 0)
    assert run.output == {"sum_up": sum(i * 10 for i in range(30))}
    assert sorted(item for item, _, _ in SEEN) == list(range(30))  # each handler ran once
    assert {key for _, key, _ in SEEN} == {f"{run.pk}/fan/{i}" for i in range(30)}
    completed = item_events(run, "item.completed")
    assert sorted(completed, key=int) == [str(i) for i in range(30)]
    assert len(set(completed)) == 30


def test_max_parallel_bounds_the_items_in_hand_with_batches():
    workflow = batched("batch_bounded", batch_size=3, max_parallel=5)
    run = workflows.start_run(workflow, {"n": 40})
    run_pending()
    assert run.steps.get(name="fan").status == "completed"
    assert len(IN_HAND) == 40
    assert max(IN_HAND) <= 5


def test_a_chaining_worker_takes_the_next_batch_in_the_transaction_that_records_one():
    run = workflows.start_run(BATCHED, {"n": 16})
    batch = claim(ITEM, ready_items(run)[0].pk, "w")
    following = run_attempt(batch, chain=True)
    assert isinstance(following, LeaseBatch)
    assert [lease.item_key for lease in following.leases] == ["8", "9", "10", "11"]
    statuses = dict(FanOutItem.objects.filter(step__run=run).values_list("key", "status"))
    assert [statuses[str(i)] for i in range(16)] == [
        *["completed"] * 4,
        *["ready"] * 4,  # released at the start, still waiting for a worker
        *["running"] * 4,  # released by the batch, claimed for the same worker
        *["pending"] * 4,
    ]


def test_failures_within_tolerance_are_counted_per_item():
    ACTIONS[2] = broken
    run = workflows.start_run(TOLERANT, {"n": 12})
    run_pending()
    step = run.steps.get(name="fan")
    assert step.status == "completed"
    assert (step.items_completed, step.items_failed) == (11, 1)
    assert step.output[2] is None
    assert item_events(run, "item.failed") == ["2"]


def test_failures_beyond_tolerance_in_one_batch_fail_the_step_and_skip_the_rest():
    ACTIONS[1] = ACTIONS[2] = broken
    run = run_inline(TOLERANT, {"n": 20})
    step = run.steps.get(name="fan")
    assert (run.status, step.status, step.error["code"]) == (
        "failed",
        "failed",
        "too_many_item_failures",
    )
    statuses = dict(FanOutItem.objects.filter(step=step).values_list("key", "status"))
    assert step.items_failed == 2
    assert step.items_skipped == list(statuses.values()).count("skipped") > 0
    # The batch's other items and the other worker-less ready items: recorded, not rerun.
    assert step.items_completed == list(statuses.values()).count("completed")
    assert step.items_completed + step.items_failed + step.items_skipped == 20
    assert run.steps.get(name="sum_up").status == "cancelled"


def test_an_item_of_a_batch_is_retried_on_its_own():
    def flaky(ctx):
        if ctx.attempt < 3:
            raise ConnectionError("flaky")

    ACTIONS[1] = flaky
    run = workflows.start_run(RETRIED, {"n": 6})
    batch = claim(ITEM, ready_items(run)[0].pk, "w")
    run_attempt(batch, chain=False)
    statuses = dict(FanOutItem.objects.filter(step__run=run).values_list("key", "status"))
    assert statuses == {
        "0": "completed",
        "1": "retry_scheduled",
        "2": "completed",
        "3": "completed",
        "4": "ready",
        "5": "ready",
    }
    run_pending(until=timezone.now() + timedelta(minutes=5))
    step = run.steps.get(name="fan")
    assert step.status == "completed"
    attempts = dict(FanOutItem.objects.filter(step=step).values_list("key", "attempt"))
    assert attempts == {"0": 1, "1": 3, "2": 1, "3": 1, "4": 1, "5": 1}
    assert [attempt for item, _, attempt in SEEN if item == 1] == [1, 2, 3]
    assert {key for item, key, _ in SEEN if item == 1} == {f"{run.pk}/fan/1"}


def test_a_lost_lease_in_a_batch_rejects_that_item_alone():
    """Item 1's lease expires and is reclaimed while the batch runs: its late result is
    rejected (``lease.lost``), the rest of the batch is recorded, and item 1 completes
    once, from its second attempt."""
    run = workflows.start_run(RETRIED, {"n": 4})
    batch = claim(ITEM, ready_items(run)[0].pk, "w")
    stolen = next(lease for lease in batch.leases if lease.item_key == "1")
    ACTIONS[0] = lambda ctx: reclaim(ITEM, stolen.unit_id, now=timezone.now() + timedelta(hours=1))
    run_attempt(batch, chain=False)

    statuses = dict(FanOutItem.objects.filter(step__run=run).values_list("key", "status"))
    assert statuses == {"0": "completed", "1": "ready", "2": "completed", "3": "completed"}
    [lost] = Event.objects.filter(run=run, type="lease.lost")
    assert (lost.payload["action"], lost.payload["attempt"]) == ("completion", 1)
    assert lost.payload["current"]["status"] == "ready"
    run_pending()
    item = FanOutItem.objects.get(step__run=run, key="1")
    assert (item.status, item.attempt, item.output) == ("completed", 2, 10)
    assert item_events(run, "item.completed").count("1") == 1
    assert run.steps.get(name="fan").items_completed == 4


def test_a_heartbeat_extends_every_lease_of_the_batch():
    def beat(ctx):
        ctx.heartbeat()

    ACTIONS[1] = beat
    workflow = batched("batch_heartbeat", timeout=timedelta(minutes=10))
    run = workflows.start_run(workflow, {"n": 4})
    batch = claim(ITEM, ready_items(run)[0].pk, "w")
    before = dict(FanOutItem.objects.filter(step__run=run).values_list("key", "version"))
    seen_versions = {}

    def look(ctx):
        seen_versions.update(FanOutItem.objects.filter(step__run=run).values_list("key", "version"))

    ACTIONS[2] = look
    run_attempt(batch, chain=False)
    assert seen_versions == {key: version + 1 for key, version in before.items()}
    assert run.steps.get(name="fan").items_completed == 4
    assert not Event.objects.filter(run=run, type="lease.lost").exists()


def test_a_heartbeat_that_finds_its_own_lease_lost_stops_that_item_only():
    run = workflows.start_run(RETRIED, {"n": 4})
    batch = claim(ITEM, ready_items(run)[0].pk, "w")
    stolen = next(lease for lease in batch.leases if lease.item_key == "2")

    def steal_then_beat(ctx):
        reclaim(ITEM, stolen.unit_id, now=timezone.now() + timedelta(hours=1))

    def beat(ctx):
        ctx.heartbeat()  # raises LeaseExpired: this attempt was taken back

    ACTIONS[0], ACTIONS[2] = steal_then_beat, beat
    run_attempt(batch, chain=False)
    assert [item for item, _, _ in SEEN] == [0, 1, 2, 3]
    statuses = dict(FanOutItem.objects.filter(step__run=run).values_list("key", "status"))
    assert statuses == {"0": "completed", "1": "completed", "2": "ready", "3": "completed"}
    # The reclaim's lease.expired is the attempt's record; the refused heartbeat adds none.
    assert not Event.objects.filter(run=run, type="lease.lost").exists()
    [expired] = Event.objects.filter(run=run, type="lease.expired")
    assert (expired.payload["kind"], expired.payload["attempt"]) == ("item", 1)


def test_an_output_the_database_refuses_fails_that_item_alone(monkeypatch):
    """A batch whose transaction the database refuses is recorded item by item."""
    from django.db import DataError

    from workflows.engine import outcomes

    def refuse(*args, **kwargs):
        raise DataError("value too long")

    monkeypatch.setattr(outcomes, "_record_batch", refuse)
    run = workflows.start_run(BATCHED, {"n": 4})
    batch = claim(ITEM, ready_items(run)[0].pk, "w")
    run_attempt(batch, chain=False)
    statuses = dict(FanOutItem.objects.filter(step__run=run).values_list("key", "status"))
    assert statuses == {key: "completed" for key in "0123"}
    assert run.steps.get(name="fan").items_completed == 4


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
        ({"batch_size": "4"}, "batch_size must be an integer >= 1, got '4'"),
        ({"batch_size": True}, "batch_size must be an integer >= 1, got True"),
        ({"batch_size": 20, "max_parallel": 10}, r"batch_size \(20\) must not exceed max_parallel"),
        (
            {"batch_size": 4, "transactional": True},
            "batch_size= cannot be combined with transactional=True",
        ),
    ],
)
def test_bad_batch_sizes_are_definition_errors(options, problem):
    node = FanOut(f"{HERE}.record", items=items, **options)
    with pytest.raises(DefinitionError, match=problem):
        type("Bad", (Workflow,), {"name": "batch_bad", "fan": node, "__module__": HERE})


def test_child_workflow_items_are_not_batched():
    node = FanOut(items=items, workflow="batch_plain", batch_size=2)
    with pytest.raises(DefinitionError, match="batch_size= applies to handler items"):
        type("Bad", (Workflow,), {"name": "batch_bad_child", "fan": node, "__module__": HERE})


@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_take_disjoint_batches():
    """Real connections, one per thread, released together: no item is claimed twice."""
    workflow = batched("batch_concurrent", batch_size=5, max_parallel=40)
    run = workflows.start_run(workflow, {"n": 40})
    ready = [item.pk for item in ready_items(run)]
    results = run_concurrently(*(lambda pk=pk: claim(ITEM, pk, f"w{pk}") for pk in ready[::5]))
    batches = [result for result in results if isinstance(result, LeaseBatch)]
    claimed = [lease.unit_id for batch in batches for lease in batch.leases]
    assert len(claimed) == len(set(claimed))
    assert len(batches) >= 1
    rows = FanOutItem.objects.filter(step__run=run, status="running")
    owners = {lease.unit_id: lease.owner for batch in batches for lease in batch.leases}
    assert dict(rows.values_list("pk", "lease_owner")) == owners


@pytest.mark.django_db(transaction=True)
def test_a_claimer_skips_items_another_claimer_holds_uncommitted():
    """PostgreSQL: worker A has claimed a batch and not committed; worker B, nudged for
    another item, neither waits for A nor takes A's items: it takes the next ones."""
    if is_sqlite():
        pytest.skip("SQLite serialises writers (BEGIN IMMEDIATE): B would wait for A")
    workflow = batched("batch_interleaved", batch_size=5, max_parallel=20)
    run = workflows.start_run(workflow, {"n": 20})
    ready = [item.pk for item in ready_items(run)]
    reached, release = threading.Event(), threading.Event()

    def hold_after_claim(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith("WITH picked") and not reached.is_set():
            reached.set()
            assert release.wait(THREAD_TIMEOUT_SECONDS), "worker B never finished"
        return result

    def worker_a():
        try:
            with connection.execute_wrapper(hold_after_claim):
                return claim(ITEM, ready[0], "a")
        finally:
            connections.close_all()

    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.update(a=worker_a()))
    thread.start()
    try:
        assert reached.wait(THREAD_TIMEOUT_SECONDS)
        [b] = run_concurrently(lambda: claim(ITEM, ready[-1], "b"))
    finally:
        release.set()
        thread.join(THREAD_TIMEOUT_SECONDS)
    a = outcome["a"]
    assert [lease.item_key for lease in a.leases] == ["0", "1", "2", "3", "4"]
    assert [lease.item_key for lease in b.leases] == ["5", "6", "7", "8", "19"]
