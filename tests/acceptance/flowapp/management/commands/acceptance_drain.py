"""Execute the ready steps of some runs until they are all finished: one of N racing workers.

Several of these processes run at once on one database, each claiming and completing
steps through ``workflows.workers.runner.execute_step`` exactly as a queue worker does, without
the queue: every step is offered to every process, so claims race all the time.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from tests.acceptance.flowapp.management.starting_line import add_go_file_argument, wait_for_go
from workflows.models import Run, Step
from workflows.status import RUN_ACTIVE, StepStatus
from workflows.workers.runner import execute_step


class Command(BaseCommand):
    help = "Run the ready steps of the runs listed in RUNS_FILE until all are finished."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("runs_file", help="JSON list of run ids")
        add_go_file_argument(parser)
        parser.add_argument("--report", help="write a JSON summary to this file at the end")
        parser.add_argument("--deadline", type=float, default=120.0, help="seconds")

    def handle(
        self,
        *args: Any,
        runs_file: str,
        go_file: str | None,
        report: str | None,
        deadline: float,
        **options: Any,
    ) -> None:
        run_ids = json.loads(Path(runs_file).read_text())
        give_up_at = time.monotonic() + deadline
        if go_file:
            wait_for_go(go_file, give_up_at=give_up_at, deadline=deadline)
        attempts = offers = 0
        while Run.objects.filter(pk__in=run_ids, status__in=RUN_ACTIVE).exists():
            if time.monotonic() > give_up_at:
                raise CommandError(f"runs still active after {deadline} s")
            ready = list(
                Step.objects.filter(run__in=run_ids, status=StepStatus.READY).values_list(
                    "pk", flat=True
                )
            )
            random.shuffle(ready)
            for step_id in ready:
                offers += 1
                attempts += execute_step(step_id)
            if not ready:
                time.sleep(0.005)
        summary = json.dumps({"pid": os.getpid(), "attempts": attempts, "offers": offers})
        if report:
            Path(report).write_text(summary)
        self.stdout.write(summary)
