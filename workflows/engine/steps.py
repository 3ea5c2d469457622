"""Transitions of leased work on a step: claim, heartbeat, complete, fail, reclaim.

Each public function here is one transaction. Losing a race never half-applies: the
loser's compare-and-set matches zero rows, nothing is written (except, for a fenced
worker, a ``lease.lost`` event saying its result was rejected) and it gets
:class:`~workflows.StaleState` or :class:`~workflows.LeaseLost`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from workflows.definitions import Task, registry
from workflows.engine.advance import Advancer, error_from_exception
from workflows.engine.attempts import begin_attempt
from workflows.engine.db import transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.lease import Lease
from workflows.engine.runs import fail_run, step_failure
from workflows.engine.sql import cas_update, claim_candidate, db_now, db_now_plus, lock_run
from workflows.errors import DefinitionMissing, LeaseLost, StaleState
from workflows.models import Step, Timer
from workflows.status import RUN_ACTIVE, StepStatus, TimerKind


@dataclass
class _Rejected:
    """A fenced write matched no row: the reason, recorded as ``lease.lost``."""

    message: str


def _fenced_update(lease: Lease, **changes: Any) -> bool:
    """Compare-and-set the leased step, fenced by (version, attempt, owner, running)."""
    updated = cas_update(
        Step,
        lease.step_id,
        version=lease.version,
        where={"attempt": lease.attempt, "lease_owner": lease.owner, "status": "running"},
        **changes,
    )
    if updated:
        lease.version += 1
    return updated


def _reject(lease: Lease, action: str) -> _Rejected:
    """Record that ``lease`` no longer holds the step and say why."""
    current = Step.objects.filter(pk=lease.step_id).values(
        "status", "attempt", "lease_owner", "version"
    ).first() or {"status": "deleted"}
    message = (
        f"{action} of step {lease.step_name!r} attempt {lease.attempt} by {lease.owner!r} "
        f"rejected: the step is now {current['status']}"
        + (f" at attempt {current['attempt']}" if "attempt" in current else "")
    )
    events = EventLog()
    events.add(
        lease.run_id,
        "lease.lost",
        step_id=lease.step_id if current["status"] != "deleted" else None,
        action=action,
        attempt=lease.attempt,
        owner=lease.owner,
        current=current,
    )
    events.flush()
    return _Rejected(message)


def _raise_if_rejected(outcome: Any, lease: Lease) -> None:
    if isinstance(outcome, _Rejected):
        raise LeaseLost(outcome.message, step=lease.step_name, attempt=lease.attempt)


def claim_step(step_id: int, owner: str) -> Lease:
    """Claim a ``ready`` step for ``owner``: ``ready → running``, attempt + 1, new lease.

    The lease expiry is computed on the database clock. Of two workers claiming the
    same step exactly one wins; the other gets :class:`StaleState` and must not run the
    handler. A run whose workflow is not registered here fails with
    ``definition_missing`` (and :class:`DefinitionMissing` is raised) instead of
    crashing the worker.
    """
    outcome = _claim(step_id, owner)
    if isinstance(outcome, tuple):
        run_id, missing = outcome
        _fail_for_missing_definition(run_id, missing)
        raise missing
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


@transition
def _claim(step_id: int, owner: str) -> Lease | Exception | tuple[UUID, DefinitionMissing]:
    candidate = claim_candidate(step_id)
    if candidate is None or candidate.step.status != StepStatus.READY:
        status = candidate.step.status if candidate is not None else "missing or being claimed"
        return StaleState(f"step {step_id} is {status}, not ready", step_id=step_id)
    try:
        workflow = registry.get(candidate.workflow_name, candidate.workflow_version)
    except DefinitionMissing as missing:
        return (candidate.run_id, missing)  # failed in its own transition: lock order
    if not isinstance(workflow.nodes.get(candidate.step.name), Task):
        return StaleState(f"step {candidate.step.name!r} is not a task of {workflow.label()}")
    events = EventLog()
    lease = begin_attempt(
        candidate.step,
        run_id=candidate.run_id,
        run_input=candidate.run_input,
        workflow=workflow,
        owner=owner,
        events=events,
    )
    if lease is None:
        return StaleState(f"step {candidate.step.name!r} was claimed by another worker")
    events.flush()
    return lease


@transition
def _fail_for_missing_definition(run_id: UUID, missing: DefinitionMissing) -> None:
    events = EventLog()
    fail_run(lock_run(run_id), missing.as_dict(), events)
    events.flush()


def heartbeat(lease: Lease) -> None:
    """Extend the lease by the step's timeout, or raise :class:`LeaseLost`.

    A heartbeat after the lease expired still succeeds as long as no other worker has
    reclaimed the step: the fence is (attempt, owner, version), not the clock.
    """
    _raise_if_rejected(_heartbeat(lease), lease)


@transition
def _heartbeat(lease: Lease) -> _Rejected | None:
    if _fenced_update(
        lease, lease_expires_at=db_now_plus(lease.node.effective_timeout), updated_at=db_now()
    ):
        return None
    return _reject(lease, "heartbeat")


def complete_step(lease: Lease, output: Any, *, claim_next: bool = False) -> Lease | None:
    """Record the attempt's output and release the steps that now can run.

    Fenced by the lease: if the step was reclaimed or cancelled meanwhile, the output is
    rejected, a ``lease.lost`` event is recorded and :class:`LeaseLost` raised. With
    ``claim_next`` the first task released is claimed for the same worker in the same
    transaction and its lease returned.
    """
    outcome = _complete(lease, output, claim_next)
    _raise_if_rejected(outcome, lease)
    return outcome


@transition
def _complete(lease: Lease, output: Any, claim_next: bool) -> Lease | _Rejected | None:
    run = lock_run(lease.run_id)
    if not _fenced_update(
        lease,
        status=StepStatus.COMPLETED,
        output=output,
        lease_expires_at=None,
        finished_at=db_now(),
        updated_at=db_now(),
    ):
        return _reject(lease, "completion")
    events = EventLog()
    events.add(run.pk, "step.completed", step_id=lease.step_id, attempt=lease.attempt)
    advancer = Advancer(
        run, lease.workflow, events, claim_owner=lease.owner if claim_next else None
    )
    if run.status in RUN_ACTIVE:
        advancer.settled(lease.step_name)
        advancer.finish()
    events.flush()
    enqueue(advancer.ready_step_ids)
    return advancer.claimed


def fail_attempt(lease: Lease, exc: BaseException) -> str:
    """Record a failed attempt: schedule a retry per policy, or fail the step and run.

    Returns the step's new status (``retry_scheduled`` or ``failed``). Fenced like
    :func:`complete_step`.
    """
    retry = lease.node.effective_retry
    retryable = retry.is_retryable(exc) and lease.attempt < retry.max_attempts
    error = error_from_exception(exc, attempt=lease.attempt)
    delay = retry.delay_after(lease.attempt) if retryable else None
    outcome = _fail(lease, error, delay)
    _raise_if_rejected(outcome, lease)
    return outcome


@transition
def _fail(lease: Lease, error: dict[str, Any], delay: timedelta | None) -> str | _Rejected:
    run = lock_run(lease.run_id)
    retrying = delay is not None and run.status in RUN_ACTIVE
    status = StepStatus.RETRY_SCHEDULED if retrying else StepStatus.FAILED
    if not _fenced_update(
        lease,
        status=status,
        error=error,
        lease_expires_at=None,
        updated_at=db_now(),
        **({} if retrying else {"finished_at": db_now()}),
    ):
        return _reject(lease, "failure")
    events = EventLog()
    if retrying:
        due_at = timezone.now() + delay
        Timer.objects.create(
            run_id=run.pk, step_id=lease.step_id, kind=TimerKind.RETRY, due_at=due_at
        )
        events.add(
            run.pk,
            "step.retry_scheduled",
            step_id=lease.step_id,
            attempt=lease.attempt,
            due_at=due_at.isoformat(),
            error=error["message"],
        )
        Advancer(run, lease.workflow, events).finish()
    else:
        events.add(
            run.pk,
            "step.failed",
            step_id=lease.step_id,
            attempt=lease.attempt,
            error=error["message"],
        )
        fail_run(run, step_failure(lease.step_name, error), events)
    events.flush()
    return status


def reclaim_step(step_id: int, *, now: datetime | None = None) -> str | None:
    """Take back a running step whose lease expired before ``now`` (default: DB clock).

    The expired attempt counts: the step goes back to ``ready`` for another attempt, or
    ``failed`` when it has used ``max_attempts``. A step of a run that ended meanwhile is
    cancelled. Returns the new status, or ``None`` when the step was not reclaimable
    (its worker finished or heartbeat first).
    """
    return _reclaim(step_id, now)


@transition
def _reclaim(step_id: int, now: datetime | None) -> str | None:
    expired = Q(lease_expires_at__lt=now if now is not None else Now())
    row = (
        Step.objects.filter(expired, pk=step_id, status=StepStatus.RUNNING)
        .only("id", "run_id", "name", "version", "attempt", "max_attempts", "lease_owner")
        .first()
    )
    if row is None:
        return None
    run = lock_run(row.run_id)
    exhausted = row.attempt >= row.max_attempts
    if run.status not in RUN_ACTIVE:
        status = StepStatus.CANCELLED  # the run ended meanwhile: no further attempt
    else:
        status = StepStatus.FAILED if exhausted else StepStatus.READY
    error = {
        "code": "lease_expired",
        "message": f"attempt {row.attempt} of step {row.name!r} by {row.lease_owner!r} "
        f"did not finish within its lease",
        "attempt": row.attempt,
    }
    # The version guard also catches a heartbeat that extended the lease since the read.
    if not cas_update(
        Step,
        row.pk,
        version=row.version,
        where={"status": StepStatus.RUNNING},
        status=status,
        error=error,
        lease_owner="",
        lease_expires_at=None,
        updated_at=db_now(),
        **({} if status == StepStatus.READY else {"finished_at": db_now()}),
    ):
        return None
    events = EventLog()
    events.add(run.pk, "lease.expired", step_id=row.pk, attempt=row.attempt, owner=row.lease_owner)
    if status == StepStatus.CANCELLED:
        events.add(run.pk, "step.cancelled", step_id=row.pk, reason=f"run {run.status}")
    elif status == StepStatus.FAILED:
        events.add(
            run.pk, "step.failed", step_id=row.pk, attempt=row.attempt, error=error["message"]
        )
        fail_run(run, step_failure(row.name, error), events)
    else:
        events.add(run.pk, "step.ready", step_id=row.pk)
        enqueue([row.pk])
    events.flush()
    return status
