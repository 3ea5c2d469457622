"""Helpers for test suites (Flowsite's and its users'): run workflows in-process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.db import connections
from django.utils import timezone

from workflows.engine.wakeups.postgresql import stop_listeners
from workflows.engine.work_kinds import WORK_KINDS
from workflows.models import Schedule
from workflows.models.leased import EXTERNAL_UNITS
from workflows.status import RUN_HELD, StepStatus
from workflows.webhooks.sender import send_due
from workflows.workers.runner import execute
from workflows.workers.scanners import (
    cancel_orphaned_children,
    deliver_hooks,
    fire_due_timers,
    repair_flows,
)
from workflows.workers.schedule_slots import fire_due_schedules
from workflows.workers.sweeper import sweep_forever

# How long a stopping sweeper thread may take (seconds) before it counts as stuck.
SWEEPER_STOP_TIMEOUT = 60.0


def stop_wakeup_listeners() -> None:
    """Stop this process's wake-up listeners (PostgreSQL): call it before the test
    database is dropped, which a listening session would prevent ("database is being
    accessed by other users"). A later ``wait_for``, long poll or sweeper starts one
    again."""
    stop_listeners()


@contextmanager
def sweeper_running() -> Iterator[None]:
    """Run the sweeper's loop (``workflows_sweeper``) in a thread of this process while
    the block runs: hooks, webhooks and timers handled as in a deployment, after real
    commits (a test using it needs them, e.g. ``django_db(transaction=True)``). The
    thread closes its database connections when it stops; a sweeper that does not stop
    within :data:`SWEEPER_STOP_TIMEOUT` raises ``RuntimeError``.
    """
    stop = threading.Event()

    def sweep() -> None:
        try:
            sweep_forever(stop)
        finally:
            connections.close_all()

    thread = threading.Thread(target=sweep, name="workflows-sweeper")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=SWEEPER_STOP_TIMEOUT)
    if thread.is_alive():
        raise RuntimeError("the sweeper did not stop")


@dataclass
class PendingResult:
    """What :func:`run_pending` did: attempts run, timers fired, schedules' passes that
    decided slots, rounds taken."""

    steps: int = 0
    timers: int = 0
    rounds: int = 0
    schedules: int = 0


def run_pending(until: datetime | None = None, *, max_rounds: int = 10_000) -> PendingResult:
    """Run every ready step, fan-out item and compensation in this process, and fire
    timers and schedules' slots due by ``until``.

    ``until`` defaults to now; pass a later moment to let sleeps, timeouts and retry
    backoffs elapse without waiting. Repeats until nothing is runnable and returns
    counts (``steps`` counts every attempt run, items and compensations included).
    Work of a paused run waits, as it does for workers. Hooks of the events written
    are sent at the end, as the sweeper would send them, and so are webhooks: every
    delivery due by ``until``, retries included, until none is due.

    Schedules fire as if time ran from now to ``until`` with a sweeper running: each
    slot at its own instant, oldest first, with the work it started run before the next
    slot is decided (so an overlap policy sees whether the earlier run has ended), none
    missed for being older than the catch-up window.
    """
    until = until or timezone.now()
    result = PendingResult()
    while result.rounds < max_rounds:
        result.rounds += 1
        fired = fire_due_timers(now=until).done
        result.timers += fired
        slots = _fire_next_slots(until)
        result.schedules += slots
        fired += slots
        cancelled = cancel_orphaned_children().done
        cancelled += repair_flows().done
        ready = [
            (kind, pk)
            for kind in WORK_KINDS
            for pk in kind.model.objects.filter(status=StepStatus.READY)
            .exclude(**{f"{kind.run_path}__status__in": RUN_HELD})
            # Held by a limit: released by the attempt, timer or operator that frees it.
            .filter(held_on="")
            # Done by workers outside the process (claim_external).
            .exclude(EXTERNAL_UNITS)
            # Highest priority first, as workers claim; then the order of each kind's
            # partial index of ready rows. Ordered by id alone, the planner would walk
            # the whole table, and every round would cost as much as the history is long.
            .order_by("-priority", "updated_at", "id")
            .values_list("id", flat=True)
        ]
        if not fired and not ready and not cancelled:
            break
        for kind, pk in ready:
            result.steps += execute(kind, pk, owner="inline")
    deliver_hooks()
    # Deliveries recorded just now are due on the database clock, which has passed ``until``.
    webhooks_due_by = max(until, timezone.now())
    while send_due(now=webhooks_due_by):
        pass
    return result


def _fire_next_slots(until: datetime) -> int:
    """Decide the schedules whose slot fires first (at its instant), or those with
    waiting slots; how many schedules a pass decided."""
    earliest = (
        Schedule.objects.filter(paused=False, next_fire_at__lte=until)
        .order_by("next_fire_at")
        .values_list("next_fire_at", flat=True)
        .first()
    )
    return fire_due_schedules(now=earliest or until).done
