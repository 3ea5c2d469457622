"""Transitions of leased work: claim, heartbeat, complete, fail, reclaim.

Leased work is a step (a task), a fan-out item or a compensation: each is claimed with
a compare-and-set ``ready → running`` that raises ``attempt`` and sets a lease, and each
later write is fenced by (row, version, attempt, owner). Every public function here is
one transaction. Losing a race never half-applies: the loser's compare-and-set matches
zero rows, nothing is written (except, for a fenced worker, a ``lease.lost`` event
saying its result was rejected) and it gets :class:`~workflows.StaleState` or
:class:`~workflows.LeaseLost`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import models
from django.db.models.functions import Now
from django.utils import timezone

from workflows.definitions import Task, Workflow, registry
from workflows.engine import items
from workflows.engine.advance import Advancer, error_from_exception
from workflows.engine.attempts import begin_attempt
from workflows.engine.compensation import record_compensation
from workflows.engine.db import transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.lease import Lease
from workflows.engine.runs import fail_run, step_failure, unwind
from workflows.engine.sql import (
    StepRow,
    bump_item_counter,
    cas_update,
    claim_candidate,
    db_now,
    db_now_plus,
    item_candidate,
    lock_run,
)
from workflows.errors import DefinitionMissing, LeaseLost, StaleState
from workflows.models import CompensationRecord, FanOutItem, Run, Step, Timer
from workflows.status import RUN_ACTIVE, RUN_UNWINDING, StepStatus, TimerKind


@dataclass
class _Rejected:
    """A fenced write matched no row: the reason, recorded as ``lease.lost``."""

    message: str


def _fenced_update(lease: Lease, **changes: Any) -> bool:
    """Compare-and-set the leased row, fenced by (version, attempt, owner, running)."""
    updated = cas_update(
        lease.model,
        lease.unit_id,
        version=lease.version,
        where={"attempt": lease.attempt, "lease_owner": lease.owner, "status": "running"},
        **changes,
    )
    if updated:
        lease.version += 1
    return updated


def _reject(lease: Lease, action: str) -> _Rejected:
    """Record that ``lease`` no longer holds its work and say why."""
    current = lease.model.objects.filter(pk=lease.unit_id).values(
        "status", "attempt", "lease_owner", "version"
    ).first() or {"status": "deleted"}
    message = (
        f"{action} of {lease.label} attempt {lease.attempt} by {lease.owner!r} "
        f"rejected: it is now {current['status']}"
        + (f" at attempt {current['attempt']}" if "attempt" in current else "")
    )
    events = EventLog()
    events.add(
        lease.run_id,
        "lease.lost",
        step_id=lease.step_id,
        kind=lease.kind,
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


def _template(
    workflow: type[Workflow],
    run_id: UUID,
    run_input: dict[str, Any],
    step_id: int,
    step_name: str,
    owner: str,
    **extra: Any,
) -> Lease:
    return Lease(
        step_id=step_id,
        run_id=run_id,
        step_name=step_name,
        attempt=0,
        owner=owner,
        version=0,
        workflow=workflow,
        run_input=run_input,
        **extra,
    )


def _claimed(lease: Lease | None, what: str) -> Lease:
    if lease is None:
        raise StaleState(f"{what} was claimed by another worker")
    return lease


def claim_step(step_id: int, owner: str) -> Lease:
    """Claim a ``ready`` step for ``owner``: ``ready → running``, attempt + 1, new lease.

    The lease expiry is computed on the database clock. Of two workers claiming the
    same step exactly one wins; the other gets :class:`StaleState` and must not run the
    handler. A run whose workflow is not registered here fails with
    ``definition_missing`` (and :class:`DefinitionMissing` is raised) instead of
    crashing the worker.
    """
    outcome = _claim_step(step_id, owner)
    if isinstance(outcome, tuple):
        run_id, missing = outcome
        _fail_for_missing_definition(run_id, missing)
        raise missing
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


@transition
def _claim_step(step_id: int, owner: str) -> Lease | Exception | tuple[UUID, DefinitionMissing]:
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
    template = _template(
        workflow, candidate.run_id, candidate.run_input, step_id, candidate.step.name, owner
    )
    lease = begin_attempt(Step, candidate.step, template, events)
    if lease is None:
        return StaleState(f"step {candidate.step.name!r} was claimed by another worker")
    events.flush()
    return lease


@transition
def _fail_for_missing_definition(run_id: UUID, missing: DefinitionMissing) -> None:
    events = EventLog()
    fail_run(lock_run(run_id), missing.as_dict(), events)
    events.flush()


@transition
def claim_item(item_id: int, owner: str) -> Lease:
    """Claim a ``ready`` fan-out item; races and failures as :func:`claim_step`."""
    found = item_candidate(item_id)
    if found is None or found[0].status != StepStatus.READY:
        raise StaleState(f"item {item_id} is not ready", item_id=item_id)
    item, step_id, candidate = found
    workflow = registry.get(candidate.workflow_name, candidate.workflow_version)
    events = EventLog()
    template = _template(
        workflow,
        candidate.run_id,
        candidate.run_input,
        step_id,
        item.name,
        owner,
        item_id=item.pk,
        item_key=item.key,
        item=item.item,
    )
    lease = _claimed(begin_attempt(FanOutItem, item, template, events), f"item {item.key!r}")
    events.flush()
    return lease


@transition
def claim_compensation(record_id: int, owner: str) -> Lease:
    """Claim a ``ready`` compensation; races as :func:`claim_step`."""
    record = (
        CompensationRecord.objects.select_related("run", "step", "item")
        .filter(pk=record_id, status=StepStatus.READY)
        .first()
    )
    if record is None:
        raise StaleState(f"compensation {record_id} is not ready", compensation=record_id)
    run = record.run
    workflow = registry.get(run.workflow_name, run.workflow_version)
    row = StepRow(record.pk, record.step.name, record.status, record.version, record.attempt)
    events = EventLog()
    template = _template(
        workflow,
        run.pk,
        run.input,
        record.step_id,
        record.step.name,
        owner,
        compensation_id=record.pk,
        compensation_handler=record.handler,
        compensated_output=record.payload.get("output"),
        item=record.payload.get("item"),
        item_id=record.item_id,
        item_key=record.item.key if record.item is not None else "",
    )
    lease = _claimed(
        begin_attempt(CompensationRecord, row, template, events), f"compensation {record_id}"
    )
    events.flush()
    return lease


def heartbeat(lease: Lease) -> None:
    """Extend the lease by the node's timeout, or raise :class:`LeaseLost`.

    A heartbeat after the lease expired still succeeds as long as no other worker has
    reclaimed the work: the fence is (attempt, owner, version), not the clock.
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
    """Record the attempt's output and release the work that now can run.

    Works for steps, items and compensations alike. Fenced by the lease: if the work
    was reclaimed or cancelled meanwhile, the output is rejected, a ``lease.lost`` event
    is recorded and :class:`LeaseLost` raised. With ``claim_next`` the first task (or
    item) released is claimed for the same worker in the same transaction and its lease
    returned.
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
    advancer = Advancer(
        run, lease.workflow, events, claim_owner=lease.owner if claim_next else None
    )
    if lease.kind == "item":
        items.item_completed(advancer, lease, output)
    elif lease.kind == "compensation":
        events.add(
            run.pk,
            "compensation.completed",
            step_id=lease.step_id,
            compensation=lease.compensation_id,
        )
        unwind(run, events)
    else:
        events.add(run.pk, "step.completed", step_id=lease.step_id, attempt=lease.attempt)
        if lease.node.compensate is not None:
            record_compensation(run, lease.step_id, lease.node, output, events)
        if run.status in RUN_ACTIVE:
            advancer.settled(lease.step_name)
        advancer.finish()
    events.flush()
    enqueue(advancer.ready_work)
    return advancer.claimed


def fail_attempt(lease: Lease, exc: BaseException) -> str:
    """Record a failed attempt: schedule a retry per policy, or fail the work for good.

    Returns the new status (``retry_scheduled`` or ``failed``). A step failing for good
    fails its run; an item counts against its fan-out's tolerance; a compensation
    leaves its run ``compensation_failed``. Fenced like :func:`complete_step`.
    """
    retry = lease.retry
    retryable = retry.is_retryable(exc) and lease.attempt < retry.max_attempts
    error = error_from_exception(exc, attempt=lease.attempt)
    delay = retry.delay_after(lease.attempt) if retryable else None
    outcome = _fail(lease, error, delay)
    _raise_if_rejected(outcome, lease)
    return outcome


def _may_retry(lease: Lease, run: Run) -> bool:
    if lease.kind == "compensation":
        return run.status in RUN_UNWINDING
    return run.status in RUN_ACTIVE


@transition
def _fail(lease: Lease, error: dict[str, Any], delay: timedelta | None) -> str | _Rejected:
    run = lock_run(lease.run_id)
    retrying = delay is not None and _may_retry(lease, run)
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
    advancer = Advancer(run, lease.workflow, events)
    settle_failure(
        advancer,
        lease.kind,
        step_id=lease.step_id,
        step_name=lease.step_name,
        unit_id=lease.unit_id,
        item_key=lease.item_key,
        attempt=lease.attempt,
        error=error,
        delay=delay if retrying else None,
    )
    events.flush()
    enqueue(advancer.ready_work)
    return status


def settle_failure(
    advancer: Advancer,
    kind: str,
    *,
    step_id: int,
    step_name: str,
    unit_id: int,
    item_key: str,
    attempt: int,
    error: dict[str, Any],
    delay: timedelta | None,
) -> None:
    """After a unit's row was moved to ``retry_scheduled`` (``delay`` given) or ``failed``:
    arm the retry timer, or apply the failure to the fan-out, the run or its unwinding."""
    run = advancer.run
    if delay is not None:
        due_at = timezone.now() + delay
        Timer.objects.create(
            run_id=run.pk,
            step_id=step_id,
            item_id=unit_id if kind == "item" else None,
            compensation_id=unit_id if kind == "compensation" else None,
            kind=TimerKind.RETRY,
            due_at=due_at,
        )
        advancer.events.add(
            run.pk,
            f"{kind}.retry_scheduled",
            step_id=step_id,
            attempt=attempt,
            due_at=due_at.isoformat(),
            error=error["message"],
        )
        advancer.finish()
    else:
        _failed_for_good(advancer, kind, step_id, step_name, item_key, error)


def _failed_for_good(
    advancer: Advancer,
    kind: str,
    step_id: int,
    step_name: str,
    item_key: str,
    error: dict[str, Any],
) -> None:
    run, events = advancer.run, advancer.events
    if kind == "item":
        items.item_failed(advancer, step_id, step_name, item_key, error)
    elif kind == "compensation":
        events.add(run.pk, "compensation.failed", step_id=step_id, error=error["message"])
        unwind(run, events)
    else:
        events.add(
            run.pk,
            "step.failed",
            step_id=step_id,
            error=error["message"],
            attempt=error.get("attempt"),
        )
        if run.status in RUN_ACTIVE:
            fail_run(run, step_failure(step_name, error), events)
        else:
            unwind(run, events)


# What to read of each kind of leased row when reclaiming it.
_RECLAIM_KIND = {Step: "step", FanOutItem: "item", CompensationRecord: "compensation"}


def reclaim(
    model: type[models.Model], unit_id: int, *, now: datetime | None = None, wait: bool = True
) -> str | None:
    """Take back running work whose lease expired before ``now`` (default: DB clock).

    The expired attempt counts: the work goes back to ``ready`` for another attempt, or
    fails for good when it has used ``max_attempts``. Forward work (a step or an item)
    of a run that stopped meanwhile is cancelled or skipped instead. Returns the new
    status, or ``None`` when the work was not reclaimable (its worker finished or
    heartbeat first).
    """
    return _reclaim(model, unit_id, now, wait)


def reclaim_step(step_id: int, *, now: datetime | None = None) -> str | None:
    """:func:`reclaim` for a step."""
    return reclaim(Step, step_id, now=now)


@transition
def _reclaim(
    model: type[models.Model], unit_id: int, now: datetime | None, wait: bool
) -> str | None:
    kind = _RECLAIM_KIND[model]
    row = (
        model.objects.filter(
            pk=unit_id,
            status=StepStatus.RUNNING,
            lease_expires_at__lt=now if now is not None else Now(),
        )
        .select_related(*(("step",) if kind != "step" else ()))
        .first()
    )
    if row is None:
        return None
    step = row if kind == "step" else row.step
    run = lock_run(step.run_id, wait=wait)
    active = run.status in (RUN_UNWINDING if kind == "compensation" else RUN_ACTIVE)
    exhausted = row.attempt >= row.max_attempts
    if not active:
        status = StepStatus.CANCELLED if kind == "step" else StepStatus.SKIPPED
        if kind == "compensation":
            status = StepStatus.FAILED
    else:
        status = StepStatus.FAILED if exhausted else StepStatus.READY
    error = {
        "code": "lease_expired",
        "message": f"attempt {row.attempt} of {kind} {step.name!r} by {row.lease_owner!r} "
        f"did not finish within its lease",
        "attempt": row.attempt,
    }
    # The version guard also catches a heartbeat that extended the lease since the read.
    if not cas_update(
        model,
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
    events.add(
        run.pk,
        "lease.expired",
        step_id=step.pk,
        kind=kind,
        attempt=row.attempt,
        owner=row.lease_owner,
    )
    workflow = registry.get(run.workflow_name, run.workflow_version)
    advancer = Advancer(run, workflow, events)
    if status == StepStatus.READY:
        events.add(run.pk, f"{kind}.ready", step_id=step.pk)
        advancer.dispatch(kind, row.pk)
    elif status == StepStatus.FAILED:
        key = getattr(row, "key", "")
        _failed_for_good(advancer, kind, step.pk, step.name, key, error)
    elif kind == "item":
        bump_item_counter(step.pk, "items_skipped")
        advancer.finish()
    else:
        events.add(run.pk, "step.cancelled", step_id=step.pk, reason=f"run {run.status}")
        advancer.finish()
    events.flush()
    enqueue(advancer.ready_work)
    return status
