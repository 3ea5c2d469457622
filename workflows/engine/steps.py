"""Transitions of leased work on a step: claim, heartbeat, complete, fail, reclaim.

Each public function here is one transaction. Losing a race never half-applies: the
loser's compare-and-set matches zero rows, nothing is written (except, for a fenced
worker, a ``lease.lost`` event saying its result was rejected) and it gets
:class:`~workflows.StaleState` or :class:`~workflows.LeaseLost`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from workflows.definitions import Task, registry
from workflows.engine.advance import Advancer, error_from_exception
from workflows.engine.db import compare_and_set, db_now_plus, transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.lease import Lease
from workflows.engine.runs import fail_run, lock_run, step_failure
from workflows.errors import DefinitionMissing, LeaseLost, StaleState
from workflows.models import Step, Timer
from workflows.status import RUN_ACTIVE, StepStatus, TimerKind


@dataclass
class _Rejected:
    """A fenced write matched no row: the reason, recorded as ``lease.lost``."""

    message: str


def _fenced(lease: Lease) -> Any:
    return Step.objects.filter(
        pk=lease.step_id, attempt=lease.attempt, lease_owner=lease.owner, status=StepStatus.RUNNING
    )


def _reject(lease: Lease, action: str, events: EventLog) -> _Rejected:
    """Record that ``lease`` no longer holds the step and say why."""
    current = Step.objects.filter(pk=lease.step_id).values(
        "status", "attempt", "lease_owner", "version"
    ).first() or {"status": "deleted"}
    message = (
        f"{action} of step {lease.step_name!r} attempt {lease.attempt} by {lease.owner!r} "
        f"rejected: the step is now {current['status']}"
        + (f" at attempt {current['attempt']}" if "attempt" in current else "")
    )
    events.add(
        lease.run_id,
        "lease.lost",
        step_id=lease.step_id if current["status"] != "deleted" else None,
        action=action,
        attempt=lease.attempt,
        owner=lease.owner,
        current=current,
    )
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
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


@transition
def _claim(step_id: int, owner: str) -> Lease | Exception:
    row = (
        Step.objects.select_related("run")
        .only(
            "id",
            "name",
            "status",
            "version",
            "attempt",
            "run__id",
            "run__status",
            "run__version",
            "run__input",
            "run__workflow_name",
            "run__workflow_version",
        )
        .filter(pk=step_id)
        .first()
    )
    if row is None or row.status != StepStatus.READY:
        status = row.status if row is not None else "deleted"
        return StaleState(f"step {step_id} is {status}, not ready", step_id=step_id)
    run = row.run
    try:
        workflow = registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing as missing:
        events = EventLog()
        fail_run(lock_run(run.pk), missing.as_dict(), events)
        events.flush()
        return missing
    node = workflow.nodes.get(row.name)
    if not isinstance(node, Task):
        return StaleState(f"step {row.name!r} is not a task of {workflow.label()}")
    if not compare_and_set(
        Step.objects.filter(pk=step_id, status=StepStatus.READY),
        version=row.version,
        status=StepStatus.RUNNING,
        attempt=row.attempt + 1,
        lease_owner=owner,
        lease_expires_at=db_now_plus(node.effective_timeout),
        started_at=Now(),
        updated_at=Now(),
    ):
        return StaleState(f"step {row.name!r} was claimed by another worker", step_id=step_id)
    events = EventLog()
    events.add(run.pk, "step.started", step_id=step_id, attempt=row.attempt + 1, owner=owner)
    events.flush()
    return Lease(
        step_id=step_id,
        run_id=run.pk,
        step_name=row.name,
        attempt=row.attempt + 1,
        owner=owner,
        version=row.version + 1,
        workflow=workflow,
        run_input=run.input,
    )


def heartbeat(lease: Lease) -> None:
    """Extend the lease by the step's timeout, or raise :class:`LeaseLost`.

    A heartbeat after the lease expired still succeeds as long as no other worker has
    reclaimed the step: the fence is (attempt, owner, version), not the clock.
    """
    _raise_if_rejected(_heartbeat(lease), lease)


@transition
def _heartbeat(lease: Lease) -> _Rejected | None:
    if compare_and_set(
        _fenced(lease),
        version=lease.version,
        lease_expires_at=db_now_plus(lease.node.effective_timeout),
        updated_at=Now(),
    ):
        lease.version += 1
        return None
    events = EventLog()
    rejected = _reject(lease, "heartbeat", events)
    events.flush()
    return rejected


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
    events = EventLog()
    if not compare_and_set(
        _fenced(lease),
        version=lease.version,
        status=StepStatus.COMPLETED,
        output=output,
        lease_expires_at=None,
        finished_at=Now(),
        updated_at=Now(),
    ):
        rejected = _reject(lease, "completion", events)
        events.flush()
        return rejected
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
def _fail(lease: Lease, error: dict[str, Any], delay: Any) -> str | _Rejected:
    run = lock_run(lease.run_id)
    events = EventLog()
    retrying = delay is not None and run.status in RUN_ACTIVE
    status = StepStatus.RETRY_SCHEDULED if retrying else StepStatus.FAILED
    if not compare_and_set(
        _fenced(lease),
        version=lease.version,
        status=status,
        error=error,
        lease_expires_at=None,
        updated_at=Now(),
        **({} if retrying else {"finished_at": Now()}),
    ):
        rejected = _reject(lease, "failure", events)
        events.flush()
        return rejected
    advancer = Advancer(run, lease.workflow, events)
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
        advancer.finish()
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
    ``failed`` when it has used ``max_attempts``. Returns the new status, or ``None``
    when the step was not reclaimable (its worker finished or heartbeat first).
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
    events = EventLog()
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
    if not compare_and_set(
        Step.objects.filter(expired, pk=step_id, status=StepStatus.RUNNING),
        version=row.version,
        status=status,
        error=error,
        lease_owner="",
        lease_expires_at=None,
        updated_at=Now(),
        **({} if status == StepStatus.READY else {"finished_at": Now()}),
    ):
        return None
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
