"""Scanners: periodic sweeps that fire timers and take back work from dead workers.

Each scanner looks at every candidate on its own: it re-checks the row inside its own
transition, skips what another process changed first, logs and continues on errors,
and returns counts. All are safe to run concurrently with themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.db.models.functions import Now

from workflows.engine import fire_timer, reclaim_step
from workflows.models import Step, Timer
from workflows.status import StepStatus, TimerStatus

logger = logging.getLogger("workflows.scanners")


@dataclass
class ScanResult:
    """How many candidates a scanner found, how many it acted on, how many errors."""

    found: int = 0
    done: int = 0
    errors: int = 0


def _sweep(ids: list[Any], act: Callable[[Any], Any], label: str) -> ScanResult:
    result = ScanResult(found=len(ids))
    for pk in ids:
        try:
            if act(pk):
                result.done += 1
        except Exception:
            result.errors += 1
            logger.exception("%s %s failed; continuing", label, pk)
    return result


def fire_due_timers(*, now: datetime | None = None, limit: int = 1000) -> ScanResult:
    """Fire timers due at ``now`` (default: the database clock)."""
    due = Q(due_at__lte=now if now is not None else Now())
    ids = list(
        Timer.objects.filter(due, status=TimerStatus.SCHEDULED)
        .order_by("due_at")
        .values_list("id", flat=True)[:limit]
    )
    return _sweep(ids, fire_timer, "timer")


def reclaim_expired_leases(*, now: datetime | None = None, limit: int = 1000) -> ScanResult:
    """Put back steps whose worker's lease expired (the attempt counts)."""
    expired = Q(lease_expires_at__lt=now if now is not None else Now())
    ids = list(
        Step.objects.filter(expired, status=StepStatus.RUNNING)
        .order_by("lease_expires_at")
        .values_list("id", flat=True)[:limit]
    )
    return _sweep(ids, lambda pk: reclaim_step(pk, now=now), "lease of step")
