"""Claim a run's ready step, wait to be told to go on, then run the attempt: a stale worker.

A worker that stalls between its claim and its handler (a GC pause, a stopped VM, a
swap storm) wakes up holding a lease that expired meanwhile and was reclaimed. The test
decides when this process wakes up by creating GO_FILE.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from tests.acceptance.flowapp.management.starting_line import wait_for_file
from workflows.engine import STEP, claim
from workflows.models import Step
from workflows.status import StepStatus
from workflows.workers.runner import run_attempt, worker_id


class Command(BaseCommand):
    help = "Claim the ready step STEP of RUN_ID, create GO_FILE.claimed, wait for GO_FILE, run it."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("run_id")
        parser.add_argument("step")
        parser.add_argument("go_file")
        parser.add_argument("--deadline", type=float, default=120.0, help="seconds")

    def handle(
        self, *args: Any, run_id: str, step: str, go_file: str, deadline: float, **options: Any
    ) -> None:
        give_up_at = time.monotonic() + deadline
        step_id = None
        while step_id is None:
            step_id = (
                Step.objects.filter(run_id=run_id, name=step, status=StepStatus.READY)
                .values_list("pk", flat=True)
                .first()
            )
            if time.monotonic() > give_up_at:
                raise CommandError(f"step {step!r} of run {run_id} never became ready")
            time.sleep(0.01)
        lease = claim(STEP, step_id, worker_id())
        Path(f"{go_file}.claimed").write_text(str(os.getpid()))
        wait_for_file(go_file, give_up_at=give_up_at, deadline=deadline)
        run_attempt(lease, chain=False)
        self.stdout.write(json.dumps({"pid": os.getpid(), "attempt": lease.attempt}))
