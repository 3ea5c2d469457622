"""Decide a schedule's due slot and stop dead before the decision commits.

The sweeper's pass starts the slot's run inside the transition that advances the
schedule; this command lets it create the run, writes the run's id to ``MARKER`` and
sleeps inside the open transaction until it is killed: the crash test kills it there
with SIGKILL, as a sweeper dying between deciding a slot and committing its start.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from unittest import mock

from django.core.management.base import BaseCommand

from workflows.engine.schedules import firing
from workflows.workers.schedule_slots import fire_due_schedules


class Command(BaseCommand):
    help = "Fire the due schedules, holding (MARKER written) once a slot's run is created."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("marker")

    def handle(self, *args: Any, marker: str, **_: Any) -> None:
        start_slot = firing.start_slot

        def hold(*args: Any, **kwargs: Any) -> Any:
            started = start_slot(*args, **kwargs)
            Path(marker).write_text(str(started.value.pk))
            while True:
                time.sleep(1)

        with mock.patch.object(firing, "start_slot", hold):
            fire_due_schedules()
