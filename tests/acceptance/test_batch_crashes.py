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
BATCH_SIZE = 4
KILLER = 6  # the item whose first attempt kills its worker, in the middle of its batch


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
    [run_id] = stack.start_runs("acceptance_batches", [{"items": ITEMS, "die_on": [str(KILLER)]}])

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
    [(_, _, killed_pid)] = [call for call in calls[str(KILLER)] if call[0] == 1]
    # The batch that never committed: the items the dead worker held, now at attempt 2.
    # Its bounds depend on how the workers split the first ready items between them (on
    # PostgreSQL two claims skip each other's locked rows), but it is consecutive items
    # taken in order, at most a batch of them, with the killer among them.
    killed = sorted(int(key) for key in keys if rows[key].attempt == 2)
    assert KILLER in killed
    assert killed == list(range(killed[0], killed[-1] + 1))
    assert len(killed) <= BATCH_SIZE
    killed_keys = {str(index) for index in killed}
    # Only that batch ran again: its items up to the killer ran under the dead worker,
    # then once more at attempt 2; the ones after the killer ran once, at attempt 2;
    # every other item ran once.
    attempts = {key: [attempt for attempt, _, _ in calls[key]] for key in keys}
    assert attempts == {
        **{key: [1] for key in keys},
        **{str(index): [1, 2] if index <= KILLER else [2] for index in killed},
    }
    for index in killed:
        if index <= KILLER:
            [(_, _, pid)] = [call for call in calls[str(index)] if call[0] == 1]
            assert pid == killed_pid
    assert {key: fan.output[int(key)]["attempt"] for key in keys} == {
        key: 2 if key in killed_keys else 1 for key in keys
    }
    # Same idempotency key on every attempt of an item, so each effect happened once:
    # the items before the killer made theirs before the crash and their reruns were
    # deduplicated.
    for key in keys:
        assert {seen for _, seen, _ in calls[key]} == {f"{run_id}/fan/{key}"}
    effects = dict(
        SideEffect.objects.filter(run_id=run_id, step_name="fan").values_list(
            "idempotency_key", "attempt"
        )
    )
    assert effects == {
        f"{run_id}/fan/{key}": 2 if key in killed_keys and int(key) >= KILLER else 1 for key in keys
    }
    assert all(pid != killed_pid for attempt, _, pid in calls[str(KILLER)] if attempt == 2)
    # The sweeper took back the leases the dead worker held, and nothing else.
    expired = Event.objects.filter(run_id=run_id, type="lease.expired")
    assert [(e.payload["kind"], e.payload["attempt"]) for e in expired] == [("item", 1)] * len(
        killed
    )
    assert all(f":{killed_pid}:" in e.payload["owner"] for e in expired)
    assert completion_problems([run_id]) == []
    assert stack.monitor.problems == []
    assert stack.monitor.samples > 0
