"""The sweeper: a small loop that fires due timers promptly and runs recovery often.

django-q2's scheduler cannot fire a timer within a second of its due time (it ticks
about every 30 s), so a deployment runs one or more sweepers beside its workers. Every
scanner is safe to run concurrently with itself, so several sweepers only add
redundancy.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass

from django.db import close_old_connections

from workflows.conf import workflow_settings
from workflows.workers.scanners import deliver_hooks, fire_due_timers, recover

logger = logging.getLogger("workflows.sweeper")

REPAIR = "repair_stuck_runs"


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


def sweep_forever(stop: threading.Event) -> None:
    """Fire timers and deliver hooks every ``TIMER_POLL_INTERVAL``, recover every
    ``RECOVERY_INTERVAL``, and repair stuck runs every ``REPAIR_INTERVAL``."""
    timer_interval = workflow_settings.TIMER_POLL_INTERVAL.total_seconds()
    clock = RecoveryClock(
        recovery_interval=workflow_settings.RECOVERY_INTERVAL.total_seconds(),
        repair_interval=workflow_settings.REPAIR_INTERVAL.total_seconds(),
    )
    while not stop.is_set():
        close_old_connections()
        try:
            fired = fire_due_timers()
            if fired.found:
                logger.info("timers: %s", asdict(fired))
            delivered = deliver_hooks()
            if delivered.found:
                logger.info("hooks: %s", asdict(delivered))
            skip = clock.scanners_to_skip(time.monotonic())
            if skip is not None:
                for name, result in recover(skip=skip).items():
                    if result.found or result.errors or result.skipped:
                        logger.info("%s: %s", name, asdict(result))
        except Exception:
            logger.exception("sweep failed; retrying after the next interval")
        stop.wait(timer_interval)
