"""Run-level transitions: running ⇄ waiting, completed, failed.

Each function is called inside a transition that already holds the run row (see
:func:`workflows.engine.sql.lock_run`), so the run's status and version read there are
current.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F
from django.db.models.functions import Now

from workflows.engine.events import EventLog
from workflows.engine.sql import cas_update, db_now
from workflows.errors import StaleState
from workflows.models import Run, Step, Timer
from workflows.status import RUN_ACTIVE, STEP_IN_HAND, RunStatus, StepStatus, TimerStatus

# Steps that have not started work yet: a failing run cancels them.
_UNSTARTED = (
    StepStatus.PENDING,
    StepStatus.READY,
    StepStatus.WAITING,
    StepStatus.RETRY_SCHEDULED,
)


def set_run_status(run: Run, status: RunStatus, events: EventLog, **changes: Any) -> None:
    """Compare-and-set the run to ``status``; raise :class:`StaleState` if it moved."""
    source = run.status
    if not cas_update(
        Run, run.pk, version=run.version, status=status, updated_at=db_now(), **changes
    ):
        raise StaleState(f"run {run.pk} changed while moving {source} → {status}", run=str(run.pk))
    run.version += 1
    run.status = status
    events.add(run.pk, f"run.{status}", source=source)


def settle_run(run: Run, sinks: tuple[str, ...], events: EventLog) -> None:
    """Bring the run's status in line with its steps: running, waiting or completed."""
    if run.status not in RUN_ACTIVE:
        return
    counts = dict(Step.objects.filter(run_id=run.pk).values_list("status").annotate(n=Count("id")))
    if set(counts) <= {StepStatus.COMPLETED, StepStatus.SKIPPED}:
        outputs = dict(
            Step.objects.filter(
                run_id=run.pk, name__in=sinks, status=StepStatus.COMPLETED
            ).values_list("name", "output")
        )
        set_run_status(run, RunStatus.COMPLETED, events, output=outputs, finished_at=db_now())
    elif STEP_IN_HAND & set(counts):
        if run.status != RunStatus.RUNNING:
            set_run_status(run, RunStatus.RUNNING, events)
    elif run.status != RunStatus.WAITING:
        set_run_status(run, RunStatus.WAITING, events)


def step_failure(step_name: str, error: dict[str, Any]) -> dict[str, Any]:
    """The run's error when a step failed for good: names the step, keeps the cause."""
    return {**error, "code": "step_failed", "step": step_name, "cause": error.get("code", "")}


def fail_run(run: Run, error: dict[str, Any], events: EventLog) -> None:
    """Fail the run with ``error`` and cancel the steps and timers that had not started.

    Steps already running are left to finish: their result is still recorded (it is
    real work), but nothing downstream starts after a failed run.
    """
    if run.status not in RUN_ACTIVE:
        return
    set_run_status(run, RunStatus.FAILED, events, error=error, finished_at=db_now())
    cancelled = list(
        Step.objects.filter(run_id=run.pk, status__in=_UNSTARTED).values_list("id", "name")
    )
    if cancelled:
        Step.objects.filter(pk__in=[pk for pk, _ in cancelled], status__in=_UNSTARTED).update(
            status=StepStatus.CANCELLED,
            version=F("version") + 1,
            updated_at=Now(),
            finished_at=Now(),
        )
        for pk, name in cancelled:
            events.add(run.pk, "step.cancelled", step_id=pk, reason="run failed", step=name)
    Timer.objects.filter(run_id=run.pk, status=TimerStatus.SCHEDULED).update(
        status=TimerStatus.CANCELLED, version=F("version") + 1
    )
