"""Run the sweeper: fire due timers promptly and recover stuck work, until stopped."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from workflows.workers.sweeper import sweep_forever


class Command(BaseCommand):
    help = (
        "Fire due timers every WORKFLOWS['TIMER_POLL_INTERVAL'], run the recovery "
        "scanners every WORKFLOWS['RECOVERY_INTERVAL'] (repair_stuck_runs every "
        "WORKFLOWS['REPAIR_INTERVAL']) until SIGINT or SIGTERM."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        self.stdout.write("workflows sweeper started")
        sweep_forever(stop)
        self.stdout.write("workflows sweeper stopped")
