"""Helpers for test suites (Flowsite's and its users'): run workflows in-process."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from workflows.models import Step
from workflows.runner import execute_step
from workflows.scanners import fire_due_timers
from workflows.status import StepStatus


@dataclass
class PendingResult:
    """What :func:`run_pending` did: step attempts run, timers fired, rounds taken."""

    steps: int = 0
    timers: int = 0
    rounds: int = 0


def run_pending(until: datetime | None = None, *, max_rounds: int = 10_000) -> PendingResult:
    """Run every ready step in this process and fire timers due by ``until``.

    ``until`` defaults to now; pass a later moment to let sleeps and retry backoffs
    elapse without waiting. Repeats until nothing is runnable and returns counts.
    """
    until = until or timezone.now()
    result = PendingResult()
    while result.rounds < max_rounds:
        result.rounds += 1
        fired = fire_due_timers(now=until).done
        result.timers += fired
        ready = list(
            Step.objects.filter(status=StepStatus.READY).order_by("id").values_list("id", flat=True)
        )
        if not fired and not ready:
            break
        for step_id in ready:
            result.steps += execute_step(step_id, owner="inline")
    return result
