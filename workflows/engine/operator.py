"""Operator verbs as transitions: cancel a run, retry or skip a step, retry a run.

Each verb names the states it accepts and raises :class:`InvalidTransition` otherwise,
records who did it in the run's history, and is one transaction (children of a
cancelled run are cancelled afterwards, each in its own, child before parent).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import F, Q

from workflows.definitions import FanOut, LeasedNode, Workflow, registry
from workflows.engine.advance import Advancer
from workflows.engine.db import transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.runs import set_run_status, stop_forward_work, unwind
from workflows.engine.sql import StepRow, cas_update, db_now, lock_run, locked_step
from workflows.errors import InvalidTransition
from workflows.models import CompensationRecord, FanOutItem, Run, Step, Timer
from workflows.status import (
    RUN_ACTIVE,
    CompensationStatus,
    RunStatus,
    StepStatus,
    TimerStatus,
)

# Steps an operator may skip: anything not yet finished, or finished by failing.
SKIPPABLE = (
    StepStatus.PENDING,
    StepStatus.READY,
    StepStatus.WAITING,
    StepStatus.RETRY_SCHEDULED,
    StepStatus.FAILED,
    StepStatus.TIMED_OUT,
)
RETRYABLE = (StepStatus.FAILED, StepStatus.TIMED_OUT)


def _by(user: Any) -> str | None:
    return user.get_username() if user is not None else None


def _refuse(what: str, status: str, accepted: Any) -> InvalidTransition:
    allowed = ", ".join(sorted(str(s) for s in accepted))
    return InvalidTransition(
        f"{what} is {status}; this operation accepts: {allowed}", status=status
    )


@transition
def cancel_run(
    run_id: UUID, *, reason: str = "", compensate: bool = True, user: Any = None
) -> None:
    """Stop a running or waiting run: cancel waiting work, compensate, end ``cancelled``.

    Running attempts finish (their results are recorded) or lose their lease; then the
    run's compensations run in reverse order unless ``compensate`` is false.
    """
    run = lock_run(run_id)
    if run.status not in RUN_ACTIVE:
        raise _refuse(f"run {run_id}", run.status, RUN_ACTIVE)
    events = EventLog()
    stop_forward_work(run, events, reason="run cancelled")
    error = {"code": "cancelled", "message": reason or "cancelled", "by": _by(user)}
    changes: dict[str, Any] = {"error": error}
    if not compensate:
        changes["skip_compensation"] = True
        run.skip_compensation = True
    set_run_status(run, RunStatus.CANCELLING, events, **changes)
    events.add(run.pk, "run.cancel_requested", by=_by(user), reason=reason, compensate=compensate)
    unwind(run, events)
    events.flush()


def _workflow(run: Run) -> type[Workflow]:
    return registry.get(run.workflow_name, run.workflow_version)


def _revive(run: Run, events: EventLog, user: Any) -> None:
    """Bring a failed run back to ``running``: steps cancelled by the failure become
    pending again and are released by graph evaluation."""
    reopened = Step.objects.filter(run_id=run.pk, status=StepStatus.CANCELLED).update(
        status=StepStatus.PENDING, version=F("version") + 1, finished_at=None, error=None
    )
    set_run_status(run, RunStatus.RUNNING, events, error=None, finished_at=None)
    events.add(run.pk, "run.resumed", by=_by(user), reopened=reopened)


def _reset_for_retry(run: Run, row: StepRow, node: Any, events: EventLog, user: Any) -> None:
    """Give a failed step fresh attempts (or its failed items, for a fan-out)."""
    if isinstance(node, FanOut):
        reset = FanOutItem.objects.filter(step_id=row.pk, status=StepStatus.FAILED).update(
            status=StepStatus.PENDING,
            max_attempts=F("attempt") + node.effective_retry.max_attempts,
            version=F("version") + 1,
            error=None,
        )
        Step.objects.filter(pk=row.pk).update(items_failed=0)
        events.add(run.pk, "items.reset", step_id=row.pk, count=reset)
    attempts = node.effective_retry.max_attempts if isinstance(node, LeasedNode) else 1
    if not cas_update(
        Step,
        row.pk,
        version=Step.objects.values_list("version", flat=True).get(pk=row.pk),
        where={"status": row.status},
        status=StepStatus.PENDING,
        error=None,
        finished_at=None,
        max_attempts=row.attempt + attempts,
        decision="",
        decided_by=None,
        decided_at=None,
        feedback="",
        selections=[],
        updated_at=db_now(),
    ):
        raise InvalidTransition(f"step {row.name!r} changed while being retried")
    events.add(run.pk, "step.retried", step_id=row.pk, by=_by(user))


@transition
def retry_step(step_id: int, *, user: Any = None) -> None:
    """Run a failed (or timed-out) step again, with fresh attempts; the run resumes."""
    run, row = locked_step(step_id)
    if row.status not in RETRYABLE:
        raise _refuse(f"step {row.name!r}", row.status, RETRYABLE)
    if run.status != RunStatus.FAILED:
        raise _refuse(f"run {run.pk}", run.status, [RunStatus.FAILED])
    workflow = _workflow(run)
    events = EventLog()
    _reset_for_retry(run, row, workflow.nodes[row.name], events, user)
    _revive(run, events, user)
    _release(run, workflow, events)


def _release(run: Run, workflow: type[Workflow], events: EventLog) -> None:
    advancer = Advancer(run, workflow, events)
    _resume_fanouts(advancer)
    advancer.release_stranded()
    advancer.finish()
    events.flush()
    enqueue(advancer.ready_work)


def _resume_fanouts(advancer: Advancer) -> None:
    """A revived fan-out keeps its completed items and reruns the others."""
    from workflows.engine.items import resume_fanout

    for step_id, name in Step.objects.filter(
        run_id=advancer.run.pk, kind="fanout", status=StepStatus.PENDING, items_total__gt=0
    ).values_list("id", "name"):
        resume_fanout(advancer, step_id, name)


@transition
def skip_step(step_id: int, *, output: Any = None, user: Any = None) -> None:
    """Record a step as done with ``output`` without running it, so the run moves on.

    Accepts steps not yet finished (pending, ready, waiting, retry scheduled) and failed
    or timed-out ones (their failed run resumes). The step ends ``completed`` with the
    operator's output; the history says who skipped it.
    """
    run, row = locked_step(step_id)
    if row.status not in SKIPPABLE:
        raise _refuse(f"step {row.name!r}", row.status, SKIPPABLE)
    if run.status not in (*RUN_ACTIVE, RunStatus.FAILED):
        raise _refuse(f"run {run.pk}", run.status, [*RUN_ACTIVE, RunStatus.FAILED])
    workflow = _workflow(run)
    events = EventLog()
    Timer.objects.filter(step_id=row.pk, status=TimerStatus.SCHEDULED).update(
        status=TimerStatus.CANCELLED, version=F("version") + 1
    )
    advancer = Advancer(run, workflow, events)
    advancer.move(row, StepStatus.COMPLETED, output=output, finished_at=db_now(), error=None)
    events.add(run.pk, "step.skipped", step_id=row.pk, by=_by(user), reason="operator")
    if run.status == RunStatus.FAILED:
        _revive(run, events, user)
        _release(run, workflow, events)
        return
    advancer.settled(row.name)
    advancer.finish()
    events.flush()
    enqueue(advancer.ready_work)


@transition
def retry_run(run_id: UUID, *, user: Any = None) -> int:
    """Retry every failed step of a failed run, or resume a run whose compensation failed.

    Returns how many steps or compensations were retried.
    """
    run = lock_run(run_id)
    accepted = (RunStatus.FAILED, RunStatus.COMPENSATION_FAILED)
    if run.status not in accepted:
        raise _refuse(f"run {run_id}", run.status, accepted)
    workflow = _workflow(run)
    events = EventLog()
    if run.status == RunStatus.COMPENSATION_FAILED:
        retried = CompensationRecord.objects.filter(
            run_id=run.pk, status=CompensationStatus.FAILED
        ).update(
            status=CompensationStatus.PENDING,
            max_attempts=F("attempt") + F("max_attempts"),
            version=F("version") + 1,
            error=None,
        )
        cancelled = (run.error or {}).get("code") == "cancelled"
        target = RunStatus.CANCELLING if cancelled else RunStatus.COMPENSATING
        set_run_status(run, target, events)
        events.add(run.pk, "compensations.retried", by=_by(user), count=retried)
        unwind(run, events)
        events.flush()
        return retried
    failed = [
        StepRow(*values)
        for values in Step.objects.filter(run_id=run.pk)
        .filter(Q(status=StepStatus.FAILED) | Q(status=StepStatus.TIMED_OUT))
        .values_list("id", "name", "status", "version", "attempt")
    ]
    for row in failed:
        _reset_for_retry(run, row, workflow.nodes[row.name], events, user)
    _revive(run, events, user)
    _release(run, workflow, events)
    return len(failed)
