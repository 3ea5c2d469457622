"""Claim a run's ready step, run its handler, and die once it returned ``Await``:
a worker killed between the handler's return and the commit of its await.

The parking is replaced by a SIGKILL of this process, so nothing of it is written: the
step stays ``running`` under this dead worker's lease until the reclaim takes it back.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from django.core.management.base import BaseCommand

from workflows.engine import STEP, claim
from workflows.models import Step
from workflows.status import StepStatus
from workflows.workers import runner


def _die(*args: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Command(BaseCommand):
    help = "Claim the ready step STEP of RUN_ID, run its handler, die before its await commits."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("run_id")
        parser.add_argument("step")

    def handle(self, *args: Any, run_id: str, step: str, **options: Any) -> None:
        step_id = Step.objects.get(run_id=run_id, name=step, status=StepStatus.READY).pk
        lease = claim(STEP, step_id, runner.worker_id())
        runner.park_for_await = _die  # type: ignore[assignment]
        runner.run_attempt(lease, chain=False)
