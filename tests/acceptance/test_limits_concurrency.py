"""Concurrency keys with real workers: the limit is never exceeded, a killed holder's slot
comes back.

The number of attempts running at once under a key is read from the event history, not
from the slots the engine keeps: an attempt is live from its ``step.started`` event to
the event of the transaction that moved its row out of ``running`` — completed, failed,
retry scheduled, cancelled, or ``lease.expired`` when the sweeper reclaimed it. So an
attempt whose worker was killed stays live until its lease is reclaimed, as the limit
counts it. (``lease.lost`` ends nothing: it records a late write of an attempt that had
already ended.)

Events are ordered by id. On SQLite writers are serialised, so id order is commit order.
On PostgreSQL each transition inserts its events in its last statement before committing;
a claim that took the slot an attempt's end freed read that end committed, so its
``step.started`` always has the larger id.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from uuid import UUID

import pytest

from tests.acceptance.flowapp.handlers import BUSY_DIR
from tests.acceptance.flowapp.limits import OnePerCustomer, PerCustomer
from tests.acceptance.flowapp.models import HandlerCall
from tests.acceptance.harness import Process, pid_of_owner
from tests.acceptance.invariants import every_problem
from tests.acceptance.stack import Stack
from workflows.models import Event, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUNS = 200
CUSTOMERS = 4
# Consecutive runs share a customer, so that three workers taking consecutive queue
# messages often want a third slot of one key: the limit binds all along.
RUNS_PER_CUSTOMER_IN_A_ROW = 5
WORKERS = 3
KILLS = 4
SECONDS_BETWEEN_KILLS = (2.0, 4.0)
STARTUP_TIMEOUT = 60.0
RUN_TIMEOUT = 400.0

# Events of the transaction that moved an attempt's row out of ``running``.
ATTEMPT_ENDED = {
    "step.completed",
    "step.failed",
    "step.retry_scheduled",
    "step.cancelled",
    "lease.expired",
}


def live_attempt_peaks(run_ids: Iterable[UUID]) -> tuple[Counter[str], list[str]]:
    """The most attempts live at once under each concurrency key, from the history; and
    the attempts still live after the last event (none once every run has finished, or
    the history lacks an event this reading relies on)."""
    keys = {
        step_id: f"customer:{run_input['customer']}"
        for step_id, run_input in Step.objects.filter(run__in=run_ids).values_list(
            "pk", "run__input"
        )
    }
    history = (
        Event.objects.filter(step_id__in=keys, type__in={"step.started", *ATTEMPT_ENDED})
        .order_by("pk")
        .values_list("step_id", "type", "payload")
    )
    live: dict[str, set[tuple[int, int]]] = defaultdict(set)
    peaks: Counter[str] = Counter()
    for step_id, kind, payload in history:
        key = keys[step_id]
        if kind == "step.started":
            live[key].add((step_id, payload["attempt"]))
            peaks[key] = max(peaks[key], len(live[key]))
        else:
            attempt = payload.get("attempt")
            live[key] -= {
                (step, number)
                for step, number in live[key]
                if step == step_id and attempt in (None, number)
            }
    left = [f"{key}: step {step} attempt {n}" for key, held in live.items() for step, n in held]
    return peaks, left


def reclaimed_owners(run_ids: Iterable[UUID]) -> list[int]:
    """The worker pids whose attempts the sweeper reclaimed (``lease.expired``)."""
    payloads = Event.objects.filter(run__in=run_ids, type="lease.expired").values_list(
        "payload", flat=True
    )
    return [pid_of_owner(payload["owner"]) for payload in payloads]


def kill_cluster(stack: Stack, cluster: Process) -> None:
    """SIGKILL the cluster's whole process group (parent, sentinel, pusher, monitor,
    workers) at once, as a lost host would go, and reap what is left."""
    cluster.watched = False
    stack.processes.signal(cluster, signal.SIGKILL)
    stack.processes.stop(cluster)


def assert_finished_cleanly(stack: Stack, run_ids: list[UUID], runs: dict) -> None:
    not_completed = {pk: (r.status, r.error) for pk, r in runs.items() if r.status != "completed"}
    assert not_completed == {}
    assert every_problem(run_ids) == []
    assert stack.monitor.problems == []


def test_a_concurrency_limit_of_two_is_never_exceeded_across_workers_that_are_killed(stack):
    """200 runs over four customers, at most two attempts per customer at once, on three
    worker processes; every few seconds the whole process group of a worker that is in
    the middle of a step is killed and a new worker started. The killed attempts keep
    their slots until the sweeper reclaims their leases; nowhere in the history do more
    than two attempts of one customer run at once, and every run completes once."""
    limit = PerCustomer.charge.max_concurrent
    clusters = [stack.qcluster(workers=1) for _ in range(WORKERS)]
    stack.sweeper()
    inputs = [
        {"customer": n // RUNS_PER_CUSTOMER_IN_A_ROW % CUSTOMERS, "pause": [0.05, 0.3]}
        for n in range(RUNS)
    ]
    run_ids = stack.start_runs("acceptance_per_customer", inputs)
    markers = stack.var_dir / BUSY_DIR
    killed: list[int] = []  # the busy worker pid of each killed cluster
    next_kill = time.monotonic() + random.uniform(*SECONDS_BETWEEN_KILLS)

    def chaos() -> None:
        nonlocal next_kill
        if len(killed) >= KILLS or time.monotonic() < next_kill:
            return
        for cluster in clusters:
            busy = [pid for pid in cluster.descendants() if (markers / str(pid)).exists()]
            if busy:
                kill_cluster(stack, cluster)
                killed.extend(busy)
                clusters.remove(cluster)
                clusters.append(stack.qcluster(workers=1))
                next_kill = time.monotonic() + random.uniform(*SECONDS_BETWEEN_KILLS)
                return

    runs = stack.wait_finished(run_ids, timeout=RUN_TIMEOUT, on_poll=chaos)

    assert len(killed) >= 2, f"only {len(killed)} workers were killed"
    # At least one kill left an attempt running that only the sweeper could end.
    assert set(killed) & set(reclaimed_owners(run_ids))
    peaks, left = live_attempt_peaks(run_ids)
    assert left == []
    assert set(peaks) == {f"customer:{n}" for n in range(CUSTOMERS)}
    assert max(peaks.values()) <= limit, peaks
    # The limit did bind: two of a key ran together, and a third waited for a slot.
    assert limit in peaks.values(), peaks
    held = Event.objects.filter(run__in=run_ids, type="step.held").values_list("payload", flat=True)
    assert {payload["on"] for payload in held} <= set(map("concurrency:{}".format, peaks))
    assert held.exists()
    assert_finished_cleanly(stack, run_ids, runs)


def test_a_killed_workers_concurrency_slot_comes_back_once_its_lease_is_reclaimed(stack):
    """One slot per customer. The attempt holding it blocks, the other run's step is held
    on the key; the worker holding the slot is killed (its whole process group). Only the
    sweeper's reclaim of the dead attempt's lease frees the slot: then the held step
    starts, on a worker started after the kill, and both runs complete."""
    key = "customer:7"
    cluster = stack.qcluster(workers=2)
    stack.sweeper()
    run_ids = stack.start_runs(OnePerCustomer.name, [{"customer": 7, "hold_attempts": [1]}] * 2)

    def holder_and_held() -> tuple[Step, Step] | None:
        steps = list(Step.objects.filter(run__in=run_ids))
        running = [s for s in steps if s.status == "running"]
        held = [s for s in steps if s.status == "ready" and s.held_on == f"concurrency:{key}"]
        return (running[0], held[0]) if running and held else None

    holder, held = stack.wait_for(
        "one step to hold the slot and the other to be held on its key",
        holder_and_held,
        timeout=STARTUP_TIMEOUT,
        run_ids=run_ids,
        interval=0.05,
    )
    [call] = HandlerCall.objects.filter(run_id=holder.run_id, attempt=1)
    assert call.pid in cluster.descendants()
    assert pid_of_owner(holder.lease_owner) == call.pid
    kill_cluster(stack, cluster)
    for run_id in run_ids:
        stack.release(run_id)
    replacement = stack.qcluster(workers=1)
    runs = stack.wait_finished(run_ids, timeout=STARTUP_TIMEOUT + 60.0)

    assert_finished_cleanly(stack, run_ids, runs)
    history = list(
        Event.objects.filter(run__in=run_ids).order_by("pk").values_list("pk", "step_id", "type")
    )
    [expired] = Event.objects.filter(step_id=holder.pk, type="lease.expired")
    assert (expired.payload["attempt"], pid_of_owner(expired.payload["owner"])) == (1, call.pid)
    held_started = [pk for pk, step, kind in history if step == held.pk and kind == "step.started"]
    # The held step started only after the dead attempt's lease was reclaimed...
    assert held_started and min(held_started) > expired.pk
    assert Event.objects.filter(
        step_id=held.pk, type="step.held", payload__on=f"concurrency:{key}"
    ).exists()
    # ...on the worker started after the kill, and never beside another attempt of the key.
    started = Step.objects.get(pk=held.pk)
    assert (started.held_on, started.attempt) == ("", 1)
    assert HandlerCall.objects.get(run_id=held.run_id).pid in replacement.descendants()
    peaks, left = live_attempt_peaks(run_ids)
    assert (peaks, left) == (Counter({key: 1}), [])
    holder_after = Step.objects.get(pk=holder.pk)
    assert (holder_after.status, holder_after.attempt) == ("completed", 2)
