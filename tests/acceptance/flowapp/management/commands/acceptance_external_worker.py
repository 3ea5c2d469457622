"""An external worker as a process of its own: claim from a queue, heartbeat, complete.

Speaks to the engine through the public Python verbs (``claim_external`` and the rest),
as a worker calling ``/api/work/`` does through the view: each job is heartbeaten every
``--beat`` seconds for ``--work`` seconds, then completed with ``{"by": NAME, "run":
RUN, "attempt": N}``. Before completing, it writes ``DIR/busy-NAME`` naming the job (the
test's signal that a kill now falls mid-attempt), and after each outcome one JSON line
``{"run", "attempt", "outcome"}``: ``completed``, ``duplicate`` or ``lost`` (the lease was
stale: revoked, expired, reclaimed). Runs until killed, or ``--jobs`` jobs are done.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

import workflows
from workflows import LeaseLost


class Command(BaseCommand):
    help = "Claim external work of QUEUE as NAME; heartbeat and complete each job."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("queue")
        parser.add_argument("name")
        parser.add_argument("directory")
        parser.add_argument("--work", type=float, default=0.5, help="seconds each job takes")
        parser.add_argument("--beat", type=float, default=0.5, help="seconds between heartbeats")
        parser.add_argument("--jobs", type=int, default=0, help="stop after this many (0: never)")

    def handle(
        self,
        *args: Any,
        queue: str,
        name: str,
        directory: str,
        work: float,
        beat: float,
        jobs: int,
        **_: Any,
    ) -> None:
        busy = Path(directory) / f"busy-{name}"
        done = 0
        while not jobs or done < jobs:
            for job in workflows.claim_external([queue], worker=name, wait=2):
                busy.write_text(json.dumps({"run": str(job.run), "attempt": job.attempt}))
                outcome = self._do(job, work, beat, name)
                busy.unlink(missing_ok=True)
                self.stdout.write(
                    json.dumps({"run": str(job.run), "attempt": job.attempt, "outcome": outcome})
                )
                self.stdout.flush()
                done += 1

    def _do(self, job: workflows.ExternalJob, work: float, beat: float, name: str) -> str:
        finish = time.monotonic() + work
        try:
            while time.monotonic() < finish:
                time.sleep(min(beat, max(finish - time.monotonic(), 0)))
                workflows.heartbeat_external(job.lease, progress=(1, 2))
            output = {"by": name, "run": str(job.run), "attempt": job.attempt}
            return "completed" if workflows.complete_external(job.lease, output) else "duplicate"
        except LeaseLost:
            return "lost"
