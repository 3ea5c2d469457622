"""The sweeper: a small loop that fires due timers promptly and runs recovery often.

django-q2's scheduler cannot fire a timer within a second of its due time (it ticks
about every 30 s), so a deployment runs one or more sweepers beside its workers. Every
scanner is safe to run concurrently with itself, so several sweepers only add
redundancy.

Between passes the sweeper waits on a watch of ``events``, ``timers`` and ``webhooks``
(:mod:`workflows.engine.wakeups`): a committed event, a timer armed due now or a webhook
delivery recorded wakes it, so hooks, such timers and webhooks go out right after the
commit; ``TIMER_POLL_INTERVAL`` stays the backstop for what no wake-up announced (a
timer coming due, a lost notification, a commit in another process on SQLite). While no
hook receiver is connected and no webhook endpoint is enabled (looked at once per
``TIMER_POLL_INTERVAL``), nothing waits for an event's delivery, and a committed event
no longer wakes it: its events are marked published at the backstop. Under a stream of
commits (each run's start and end notify) a pass per wake-up cost the sweeper and its
PostgreSQL backend 0.5 ms of CPU per step (``docs/benchmarks.md``, issue #26).

Schedules' slots (:mod:`workflows.workers.schedule_slots`) are looked at once per
``TIMER_POLL_INTERVAL`` (200 ms by default), whatever woke the sweeper: a slot starts
within that interval of its time, and a pass per commit costs nothing more.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass

from django.db import close_old_connections

from workflows.conf import workflow_settings
from workflows.engine.wakeups import Watch
from workflows.services.schedules import install_declared_schedules
from workflows.workers.scanners import (
    deliver_hooks,
    events_awaited,
    fire_due_timers,
    recover,
    send_webhooks,
)
from workflows.workers.schedule_slots import fire_due_schedules

logger = logging.getLogger("workflows.sweeper")

REPAIR = "repair_stuck_runs"
# What wakes the sweeper between polls (see the module).
TOPICS = ("events", "timers", "webhooks")
# ... while nothing waits for events' delivery (see the module).
QUIET_TOPICS = ("timers", "webhooks")
# How often a sweeper waiting for a wake-up looks whether it is asked to stop (seconds).
STOP_CHECK = 0.1
# The shortest time from one pass's start to the next (seconds): under a stream of
# commits (every step writes events) a pass per commit would cost the database and the
# CPU more than the workers' own steps; one pass handles all that committed meanwhile.
PASS_GAP = 0.02


@dataclass
class RecoveryClock:
    """When the next recovery pass, and the next one that repairs stuck runs, are due.

    Times are ``time.monotonic()`` seconds. Repair has an interval of its own because it
    checks every active run: with 100,000 runs asleep for days one pass costs about a
    second (``bench/scale.py``), while every other scanner reads only the rows it acts on.
    """

    recovery_interval: float
    repair_interval: float
    next_recovery: float = 0.0
    next_repair: float = 0.0

    def scanners_to_skip(self, now: float) -> tuple[str, ...] | None:
        """``None`` when no recovery pass is due at ``now``; else the scanners it skips."""
        if now < self.next_recovery:
            return None
        self.next_recovery = now + self.recovery_interval
        if now < self.next_repair:
            return (REPAIR,)
        self.next_repair = now + self.repair_interval
        return ()


def wait_for_work(watch: Watch, stop: threading.Event, timeout: float) -> None:
    """Return when one of the watch's topics is woken, ``stop`` is set, or ``timeout``
    seconds pass; ``stop`` is looked at every :data:`STOP_CHECK` seconds."""
    end = time.monotonic() + timeout
    while not stop.is_set():
        left = end - time.monotonic()
        if left <= 0 or watch.wait(min(left, STOP_CHECK)):
            return


def sweep_forever(stop: threading.Event) -> None:
    """Install the declared schedules, then fire timers and schedules' slots and deliver
    hooks (and send webhooks recorded for them) when woken by a commit and at least every
    ``TIMER_POLL_INTERVAL``, recover every
    ``RECOVERY_INTERVAL``, and repair stuck runs every ``REPAIR_INTERVAL``."""
    timer_interval = workflow_settings.TIMER_POLL_INTERVAL.total_seconds()
    clock = RecoveryClock(
        recovery_interval=workflow_settings.RECOVERY_INTERVAL.total_seconds(),
        repair_interval=workflow_settings.REPAIR_INTERVAL.total_seconds(),
    )
    try:
        installed = install_declared_schedules()
        if any(asdict(installed).values()):
            logger.info("declared schedules: %s", asdict(installed))
    except Exception:
        logger.exception("installing the declared schedules failed; firing the installed ones")
    # Made before the first pass reads anything: a commit during a pass wakes the next.
    watch, quiet = Watch(TOPICS), Watch(QUIET_TOPICS)
    webhooks = Watch(("webhooks",))
    awaited, next_look = True, 0.0
    while not stop.is_set():
        pass_started = time.monotonic()
        close_old_connections()
        try:
            if pass_started >= next_look:
                awaited, next_look = events_awaited(), pass_started + timer_interval
                # Schedules once per interval, not per wake-up: a stream of commits must
                # not add a statement to every pass (see the module).
                slots = fire_due_schedules()
                if slots.found:
                    logger.info("schedules: %s", asdict(slots))
            fired = fire_due_timers()
            if fired.found:
                logger.info("timers: %s", asdict(fired))
            delivered = deliver_hooks()
            if delivered.found:
                logger.info("hooks: %s", asdict(delivered))
            if webhooks.wait(0):
                sent = send_webhooks()
                if sent.found:
                    logger.info("webhooks: %s", asdict(sent))
            skip = clock.scanners_to_skip(time.monotonic())
            if skip is not None:
                for name, result in recover(skip=skip).items():
                    if result.found or result.errors or result.skipped:
                        logger.info("%s: %s", name, asdict(result))
        except Exception:
            logger.exception("sweep failed; retrying after the next interval")
        wait_for_work(watch if awaited else quiet, stop, timer_interval)
        stop.wait(pass_started + PASS_GAP - time.monotonic())
