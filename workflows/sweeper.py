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
from dataclasses import asdict

from django.db import close_old_connections

from workflows.conf import workflow_settings
from workflows.scanners import deliver_hooks, fire_due_timers, recover

logger = logging.getLogger("workflows.sweeper")


def sweep_forever(stop: threading.Event) -> None:
    """Fire timers and deliver hooks every ``TIMER_POLL_INTERVAL``, recover every
    ``RECOVERY_INTERVAL``."""
    timer_interval = workflow_settings.TIMER_POLL_INTERVAL.total_seconds()
    recovery_interval = workflow_settings.RECOVERY_INTERVAL.total_seconds()
    next_recovery = time.monotonic()
    while not stop.is_set():
        close_old_connections()
        try:
            fired = fire_due_timers()
            if fired.found:
                logger.info("timers: %s", asdict(fired))
            delivered = deliver_hooks()
            if delivered.found:
                logger.info("hooks: %s", asdict(delivered))
            if time.monotonic() >= next_recovery:
                next_recovery = time.monotonic() + recovery_interval
                for name, result in recover().items():
                    if result.found or result.errors or result.skipped:
                        logger.info("%s: %s", name, asdict(result))
        except Exception:
            logger.exception("sweep failed; retrying after the next interval")
        stop.wait(timer_interval)
