"""Fan-out: items stored once with unique keys, bounded parallelism, exact counters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from tests.support.runs import run_inline
from workflows import FanOut, PermanentError, Retry, Task, Workflow
from workflows.engine import ITEM, claim, complete_work
from workflows.models import FanOutItem
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.nodes.test_fanout"
SEEN: list[tuple[str, str]] = []


def double(ctx):
    SEEN.append((ctx.item["sku"], ctx.idempotency_key))
    if ctx.item.get("broken"):
        raise PermanentError(f"cannot ship {ctx.item['sku']}")
    return ctx.item["qty"] * 2


def total(ctx):
    return sum(ctx.steps["ship"].output)


@pytest.fixture(autouse=True)
def _reset():
    SEEN.clear()


def parcels(ctx):
    return ctx.input["parcels"]


class Shipping(Workflow):
    name = "fanout_shipping"
    ship = FanOut(
        f"{HERE}.double",
        items=parcels,
        key=lambda item: item["sku"],
        max_parallel=2,
        tolerated_failures=1,
        retry=Retry(max_attempts=1),
    )
    sum_up = Task(f"{HERE}.total")


class Strict(Workflow):
    name = "fanout_strict"
    ship = FanOut(f"{HERE}.double", items=parcels, max_parallel=3, retry=Retry(max_attempts=1))
    never = Task(NOOP)


class Ratio(Workflow):
    name = "fanout_ratio"
    ship = FanOut(
        f"{HERE}.double", items=parcels, tolerated_failure_ratio=0.5, retry=Retry(max_attempts=1)
    )


class Many(Workflow):
    name = "fanout_many"
    work = FanOut(NOOP, items=lambda ctx: list(range(ctx.input["n"])), max_parallel=50)


def items_of(n, broken=()):
    return [
        {"sku": f"s{i}", "qty": i, **({"broken": True} if i in broken else {})} for i in range(n)
    ]


def test_items_are_stored_once_and_released_max_parallel_at_a_time():
    run = workflows.start_run(Shipping, {"parcels": items_of(5)})
    step = run.steps.get(name="ship")
    assert step.status == "running"
    assert step.items_total == 5
    statuses = list(FanOutItem.objects.filter(step=step).values_list("key", "status"))
    assert statuses == [
        ("s0", "ready"),
        ("s1", "ready"),
        *[(f"s{i}", "pending") for i in (2, 3, 4)],
    ]


def test_fanout_completes_with_outputs_in_item_order():
    run = run_inline(Shipping, {"parcels": items_of(5)})
    step = run.steps.get(name="ship")
    assert step.status == "completed"
    assert step.output == [0, 2, 4, 6, 8]
    assert (step.items_completed, step.items_failed, step.items_skipped) == (5, 0, 0)
    assert run.output == {"sum_up": 20}
    assert {key for _, key in SEEN} == {f"{run.pk}/ship/s{i}" for i in range(5)}


def test_failures_within_tolerance_complete_the_step_with_null_outputs():
    run = workflows.start_run(Shipping, {"parcels": items_of(4, broken={2})})
    run_pending()
    step = run.steps.get(name="ship")
    assert step.status == "completed"
    assert step.output == [0, 2, None, 6]
    assert (step.items_completed, step.items_failed) == (3, 1)


def test_exceeding_tolerance_fails_the_step_and_cancels_the_rest():
    run = run_inline(Strict, {"parcels": items_of(10, broken={1})})
    step = run.steps.get(name="ship")
    assert step.status == "failed"
    assert step.error["code"] == "too_many_item_failures"
    assert run.status == "failed"
    assert run.steps.get(name="never").status == "cancelled"
    counts = step.items_completed + step.items_failed + step.items_skipped
    assert step.items_failed == 1
    assert step.items_skipped == FanOutItem.objects.filter(step=step, status="skipped").count()
    assert step.items_skipped > 0
    assert counts == 10
    assert len(SEEN) < 10  # skipped items never ran


def test_tolerated_failure_ratio():
    run = workflows.start_run(Ratio, {"parcels": items_of(4, broken={0, 1})})
    run_pending()
    assert run.steps.get(name="ship").status == "completed"
    run = workflows.start_run(Ratio, {"parcels": items_of(4, broken={0, 1, 2})})
    run_pending()
    assert run.steps.get(name="ship").status == "failed"


def test_duplicate_keys_fail_the_step_naming_the_key():
    dupes = [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 1}, {"sku": "a", "qty": 2}]
    run = workflows.start_run(Shipping, {"parcels": dupes})
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error["cause"] == "items_error"
    assert "items 0 and 2 have the same key 'a'" in run.error["message"]
    assert not FanOutItem.objects.exists()


def odd_keys(odd_key: str) -> type[Workflow]:
    """Keys are computed by user code, so they can be anything: the engine checks them."""
    return type(
        f"OddKeys{len(odd_key)}",
        (Workflow,),
        {
            "__module__": __name__,
            "name": f"fanout_odd_keys_{len(odd_key)}",
            "work": FanOut(
                NOOP,
                items=lambda ctx: [0, 1],
                key=lambda item: odd_key if item == 1 else "fine",
            ),
        },
    )


LONG_KEYS, NUL_KEYS = odd_keys("k" * 256), odd_keys("a\x00b")


@pytest.mark.parametrize("workflow", [LONG_KEYS, NUL_KEYS])
def test_keys_the_database_cannot_store_fail_the_step_clearly(workflow):
    run = workflows.start_run(workflow)
    run.refresh_from_db()
    assert (run.status, run.error["cause"]) == ("failed", "items_error")
    assert "item 1 has key" in run.error["message"]
    assert "at most 255 characters, without NUL" in run.error["message"]
    assert not FanOutItem.objects.exists()


def test_items_that_are_not_json_fail_clearly():
    class Bad(Workflow):
        name = "fanout_bad_items"
        work = FanOut(NOOP, items=lambda ctx: [object()])

    run = workflows.start_run(Bad)
    run.refresh_from_db()
    assert run.status == "failed"
    assert "not JSON serializable" in run.error["message"]


def test_no_items_completes_at_once_with_an_empty_list():
    run = workflows.start_run(Shipping, {"parcels": []})
    assert run.steps.get(name="ship").output == []
    run_pending()
    run.refresh_from_db()
    assert run.output == {"sum_up": 0}


def test_advancing_one_item_costs_the_same_queries_whatever_the_number_of_items():
    def cost(n: int) -> int:
        run = workflows.start_run(Many, {"n": n})
        step = run.steps.get()
        first = FanOutItem.objects.filter(step=step, status="ready").order_by("index").first()
        lease = claim(ITEM, first.pk, "w")
        with CaptureQueriesContext(connection) as captured:
            following = complete_work(lease, None, claim_next=True)
        assert following is not None and following.kind is ITEM
        skipped = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT")
        return len([q for q in captured.captured_queries if not q["sql"].startswith(skipped)])

    assert cost(60) == cost(3000)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_ten_thousand_items_run_to_completion():
    """Committed transitions, as in production (inside one test transaction PostgreSQL
    would carry 20,000 savepoints)."""
    run = run_inline(Many, {"n": 10_000})
    step = run.steps.get()
    assert run.status == "completed"
    assert step.items_completed == 10_000
    assert len(step.output) == 10_000


def test_item_retries_are_per_item():
    class Flaky(Workflow):
        name = "fanout_flaky"
        work = FanOut(
            f"{HERE}.flaky_item",
            items=lambda ctx: ["a", "b"],
            retry=Retry(max_attempts=3, initial_interval=timedelta(seconds=5)),
        )

    run = workflows.start_run(Flaky)
    run_pending(until=timezone.now() + timedelta(minutes=5))
    step = run.steps.get()
    assert step.status == "completed"
    attempts = dict(FanOutItem.objects.filter(step=step).values_list("key", "attempt"))
    assert attempts == {"0": 1, "1": 3}


def flaky_item(ctx):
    if ctx.item == "b" and ctx.attempt < 3:
        raise ConnectionError("flaky")
    return ctx.item


def test_an_item_whose_worker_died_is_reclaimed_after_its_lease_and_retried():
    from workflows.workers.scanners import reclaim_expired_leases

    run = workflows.start_run(Shipping, {"parcels": items_of(2)})
    item = FanOutItem.objects.filter(step__run=run, status="ready").order_by("index").first()
    claim(ITEM, item.pk, "doomed-worker")  # the worker dies mid-item
    assert reclaim_expired_leases(now=timezone.now() + timedelta(hours=1)).done == 1
    item.refresh_from_db()
    assert (item.status, item.attempt, item.error["code"]) == ("failed", 1, "lease_expired")
    run_pending()
    step = run.steps.get(name="ship")
    assert step.status == "completed"  # one failure is tolerated
    assert (step.items_completed, step.items_failed) == (1, 1)
