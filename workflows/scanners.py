"""Scanners: periodic sweeps that fire timers and take back work from dead workers.

Each scanner looks at every candidate on its own: it re-checks the row inside its own
transition, skips what another process changed first, logs and continues on errors,
and returns counts. All are safe to run concurrently with themselves. With
``dry_run`` a scanner only counts what it would act on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef
from django.db.models.functions import Now
from django.utils import timezone

from workflows.conf import workflow_settings
from workflows.engine import fire_timer, reclaim_step
from workflows.engine.recovery import delete_finished_runs, redispatch_step, repair_run
from workflows.models import Run, Step, Timer
from workflows.status import RUN_ACTIVE, RUN_FINAL, StepStatus, TimerStatus

logger = logging.getLogger("workflows.scanners")

# Step states that will move on by themselves: a run with none of them is stuck.
_IN_FLIGHT = (
    StepStatus.READY,
    StepStatus.RUNNING,
    StepStatus.WAITING,
    StepStatus.RETRY_SCHEDULED,
)


@dataclass
class ScanResult:
    """How many candidates a scanner found, how many it acted on, how many errors."""

    found: int = 0
    done: int = 0
    errors: int = 0


def _sweep(ids: list[Any], act: Callable[[Any], Any], label: str, dry_run: bool) -> ScanResult:
    result = ScanResult(found=len(ids))
    if dry_run:
        return result
    for pk in ids:
        try:
            if act(pk):
                result.done += 1
        except Exception:
            result.errors += 1
            logger.exception("%s %s failed; continuing", label, pk)
    return result


def _clock(now: datetime | None) -> Any:
    return now if now is not None else Now()


def fire_due_timers(
    *, now: datetime | None = None, limit: int = 1000, dry_run: bool = False
) -> ScanResult:
    """Fire timers due at ``now`` (default: the database clock)."""
    ids = list(
        Timer.objects.filter(due_at__lte=_clock(now), status=TimerStatus.SCHEDULED)
        .order_by("due_at")
        .values_list("id", flat=True)[:limit]
    )
    return _sweep(ids, fire_timer, "timer", dry_run)


def reclaim_expired_leases(
    *, now: datetime | None = None, limit: int = 1000, dry_run: bool = False
) -> ScanResult:
    """Put back steps whose worker's lease expired (the attempt counts)."""
    ids = list(
        Step.objects.filter(lease_expires_at__lt=_clock(now), status=StepStatus.RUNNING)
        .order_by("lease_expires_at")
        .values_list("id", flat=True)[:limit]
    )
    return _sweep(ids, lambda pk: reclaim_step(pk, now=now), "lease of step", dry_run)


def redispatch_unclaimed(
    *, now: datetime | None = None, limit: int = 1000, dry_run: bool = False
) -> ScanResult:
    """Re-send ready steps that nobody claimed within ``REDISPATCH_AFTER`` (lost nudges)."""
    ready_before = (now or timezone.now()) - workflow_settings.REDISPATCH_AFTER
    ids = list(
        Step.objects.filter(status=StepStatus.READY, updated_at__lt=ready_before)
        .order_by("updated_at")
        .values_list("id", flat=True)[:limit]
    )
    return _sweep(
        ids, lambda pk: redispatch_step(pk, ready_before=ready_before), "redispatch", dry_run
    )


def repair_stuck_runs(*, limit: int = 1000, dry_run: bool = False) -> ScanResult:
    """Settle active runs that have no step in flight (nothing would ever wake them)."""
    in_flight = Step.objects.filter(run=OuterRef("pk"), status__in=_IN_FLIGHT)
    ids = list(
        Run.objects.filter(status__in=RUN_ACTIVE)
        .exclude(Exists(in_flight))
        .order_by("updated_at")
        .values_list("id", flat=True)[:limit]
    )
    return _sweep(ids, repair_run, "repair of run", dry_run)


def purge_finished_runs(
    *, older_than: Any = None, limit: int = 1000, dry_run: bool = False
) -> ScanResult:
    """Delete finished runs older than ``older_than`` (default: the ``RETENTION`` setting).

    Does nothing when neither is set: history is kept forever unless asked otherwise.
    """
    retention = older_than if older_than is not None else workflow_settings.RETENTION
    if retention is None:
        return ScanResult()
    finished_before = timezone.now() - retention
    ids = list(
        Run.objects.filter(
            status__in=RUN_FINAL, parent_run__isnull=True, finished_at__lt=finished_before
        ).values_list("id", flat=True)[:limit]
    )
    result = ScanResult(found=len(ids))
    if ids and not dry_run:
        result.done = delete_finished_runs(ids, finished_before=finished_before)
    return result


RECOVERY_SCANNERS: dict[str, Callable[..., ScanResult]] = {
    "fire_due_timers": fire_due_timers,
    "reclaim_expired_leases": reclaim_expired_leases,
    "redispatch_unclaimed": redispatch_unclaimed,
    "repair_stuck_runs": repair_stuck_runs,
    "purge_finished_runs": purge_finished_runs,
}


def recover(*, dry_run: bool = False) -> dict[str, ScanResult]:
    """Run every scanner once, in order, and return what each found and did."""
    return {name: scan(dry_run=dry_run) for name, scan in RECOVERY_SCANNERS.items()}
