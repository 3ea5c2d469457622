"""A worker killed in the middle of a batch of fan-out items (``FanOut(batch_size=N)``).

A batch's outcomes commit together, after its last handler: a worker that dies before
that leaves every item of its batch ``running`` under its lease. The sweeper reclaims
them once the lease runs out, and another worker runs them again with the same
idempotency keys; batches that committed before are never run again.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from uuid import UUID

import pytest

from tests.acceptance.flowapp.models import HandlerCall, SideEffect
from tests.acceptance.invariants import completion_problems
from tests.acceptance.stack import Stack
from workflows.models import Event, FanOutItem, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT = 90.0  # qcluster start, a 2 s lease running out, the reclaim, the rerun
ITEMS = 12
KILLED_BATCH = ("4", "5", "6", "7")  # the second batch; its third item kills the worker


def calls_by_item(run_id: UUID) -> dict[str, list[tuple[int, str, int]]]:
    """(attempt, idempotency key, pid) of every handler call, by item key."""
    found: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
    calls = HandlerCall.objects.filter(run_id=run_id, step_name="fan").order_by("id")
    for attempt, key, pid in calls.values_list("attempt", "idempotency_key", "pid"):
        found[key.rsplit("/", 1)[1]].append((attempt, key, pid))
    return found


def test_a_worker_killed_mid_batch_reruns_only_the_uncommitted_items(stack: Stack) -> None:
    stack.qcluster(workers=2)
    stack.sweeper()
    [run_id] = stack.start_runs("acceptance_batches", [{"items": ITEMS, "die_on": ["6"]}])

    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()

    assert run.status == "completed"
    fan = Step.objects.get(run_id=run_id, name="fan")
    assert (fan.status, fan.items_completed, fan.items_failed) == ("completed", ITEMS, 0)
    keys = [str(i) for i in range(ITEMS)]
    # Every item's result was recorded exactly once.
    completed = Counter(
        event.payload["item"]
        for event in Event.objects.filter(run_id=run_id, type="item.completed")
    )
    assert completed == Counter(keys)
    rows = {item.key: item for item in FanOutItem.objects.filter(step=fan)}
    assert {key: row.status for key, row in rows.items()} == dict.fromkeys(keys, "completed")

    calls = calls_by_item(run_id)
    [(_, _, killed_pid)] = [call for call in calls["6"] if call[0] == 1]
    # Only the batch that never committed ran again: its items that had run (4, 5) and
    # the one that killed the worker (6) ran twice, the one after it (7) once, at
    # attempt 2; every other item ran once.
    attempts = {key: [attempt for attempt, _, _ in calls[key]] for key in keys}
    assert attempts == {
        **{key: [1] for key in keys},
        "4": [1, 2],
        "5": [1, 2],
        "6": [1, 2],
        "7": [2],
    }
    assert {key: rows[key].attempt for key in keys} == {
        key: 2 if key in KILLED_BATCH else 1 for key in keys
    }
    assert {key: fan.output[int(key)]["attempt"] for key in keys} == {
        key: 2 if key in KILLED_BATCH else 1 for key in keys
    }
    # Same idempotency key on every attempt of an item, so each effect happened once:
    # items 4 and 5 made theirs before the crash and their reruns were deduplicated.
    for key in keys:
        assert {seen for _, seen, _ in calls[key]} == {f"{run_id}/fan/{key}"}
    effects = dict(
        SideEffect.objects.filter(run_id=run_id, step_name="fan").values_list(
            "idempotency_key", "attempt"
        )
    )
    assert effects == {f"{run_id}/fan/{key}": 2 if key in ("6", "7") else 1 for key in keys}
    assert all(pid != killed_pid for attempt, _, pid in calls["6"] if attempt == 2)
    # The sweeper took back the four leases the dead worker held, and nothing else.
    expired = Event.objects.filter(run_id=run_id, type="lease.expired")
    assert [(e.payload["kind"], e.payload["attempt"]) for e in expired] == [("item", 1)] * 4
    assert all(f":{killed_pid}:" in e.payload["owner"] for e in expired)
    assert completion_problems([run_id]) == []
    assert stack.monitor.problems == []
    assert stack.monitor.samples > 0
