"""What becomes of an attempt of leased work: heartbeat, completion, failure.

Every write here is fenced by the worker's lease: a compare-and-set on (row, version,
attempt, owner, ``running``). Losing a race never half-applies: the loser's write
matches zero rows, nothing is written but a ``lease.lost`` event saying its result was
rejected, and it gets :class:`~workflows.LeaseLost`. What a completion or a final
failure does to the run is the kind's :class:`~workflows.engine.work_kinds.Settlement`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from workflows.engine.advance import Advancer, error_from_exception
from workflows.engine.events import EventLog
from workflows.engine.lease import Lease
from workflows.engine.scope import run_scope
from workflows.engine.sql import cas_update, db_now, db_now_plus
from workflows.engine.transaction import transition
from workflows.engine.work_kinds import FailedUnit
from workflows.errors import LeaseLost
from workflows.models import Timer
from workflows.status import StepStatus, TimerKind


@dataclass
class _Rejected:
    """A fenced write matched no row: the reason, recorded as ``lease.lost``."""

    message: str


def _fenced_update(lease: Lease, **changes: Any) -> bool:
    """Compare-and-set the leased row, fenced by (version, attempt, owner, running)."""
    updated = cas_update(
        lease.kind.model,
        lease.unit_id,
        version=lease.version,
        where={"attempt": lease.attempt, "lease_owner": lease.owner, "status": "running"},
        **changes,
    )
    if updated:
        lease.version += 1
    return updated


def _reject(lease: Lease, action: str, events: EventLog) -> _Rejected:
    """Record that ``lease`` no longer holds its work and say why."""
    current = lease.kind.model.objects.filter(pk=lease.unit_id).values(
        "status", "attempt", "lease_owner", "version"
    ).first() or {"status": "deleted"}
    message = (
        f"{action} of {lease.label} attempt {lease.attempt} by {lease.owner!r} "
        f"rejected: it is now {current['status']}"
        + (f" at attempt {current['attempt']}" if "attempt" in current else "")
    )
    events.add(
        lease.run_id,
        "lease.lost",
        step_id=lease.step_id,
        kind=lease.kind.name,
        action=action,
        attempt=lease.attempt,
        owner=lease.owner,
        current=current,
    )
    return _Rejected(message)


def _raise_if_rejected(outcome: Any, lease: Lease) -> None:
    if isinstance(outcome, _Rejected):
        raise LeaseLost(outcome.message, step=lease.step_name, attempt=lease.attempt)


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
    return _record_rejection(lease, "heartbeat")


def record_lost_lease(lease: Lease, action: str) -> None:
    """Write the ``lease.lost`` event of a rejected ``action`` in a transaction of its own.

    For a rejection whose first record was rolled back with its caller's transaction:
    a transactional handler's attempt undoes the handler's writes, and the rejection
    with them, when its completion is fenced out.
    """
    transition(_record_rejection)(lease, action)


def _record_rejection(lease: Lease, action: str) -> _Rejected:
    events = EventLog()
    rejected = _reject(lease, action, events)
    events.flush()
    return rejected


def complete_work(lease: Lease, output: Any, *, claim_next: bool = False) -> Lease | None:
    """Record the attempt's output and release the work that now can run.

    For a step, an item or a compensation alike. Fenced by the lease: if the work was
    reclaimed or cancelled meanwhile, the output is rejected, a ``lease.lost`` event is
    recorded and :class:`LeaseLost` raised. With ``claim_next`` the first task (or
    item) released is claimed for the same worker in the same transaction and its
    lease returned.
    """
    outcome = _complete(lease, output, claim_next)
    _raise_if_rejected(outcome, lease)
    return outcome


@transition
def _complete(lease: Lease, output: Any, claim_next: bool) -> Lease | _Rejected | None:
    owner = lease.owner if claim_next else None
    with run_scope(lease.run_id, workflow=lease.workflow, claim_owner=owner) as scope:
        if not _fenced_update(
            lease,
            status=StepStatus.COMPLETED,
            output=output,
            lease_expires_at=None,
            finished_at=db_now(),
            updated_at=db_now(),
        ):
            return _reject(lease, "completion", scope.events)
        lease.kind.settlement.completed(scope.advancer, lease, output)
    return scope.claimed


def fail_attempt(lease: Lease, exc: BaseException) -> str:
    """Record a failed attempt: schedule a retry per policy, or fail the work for good.

    Returns the new status (``retry_scheduled`` or ``failed``). A step failing for good
    fails its run; an item counts against its fan-out's tolerance; a compensation
    leaves its run ``compensation_failed``. Fenced like :func:`complete_work`.
    """
    delay = lease.retry_delay() if lease.retry.is_retryable(exc) else None
    outcome = _fail(lease, error_from_exception(exc, attempt=lease.attempt), delay)
    _raise_if_rejected(outcome, lease)
    return outcome


@transition
def _fail(lease: Lease, error: dict[str, Any], delay: timedelta | None) -> str | _Rejected:
    with run_scope(lease.run_id, workflow=lease.workflow) as scope:
        kind = lease.kind
        if scope.run.status not in kind.runs_while | kind.held_while:
            delay = None  # the run stopped meanwhile: no further attempt
        status = StepStatus.RETRY_SCHEDULED if delay is not None else StepStatus.FAILED
        if not _fenced_update(
            lease,
            status=status,
            error=error,
            lease_expires_at=None,
            updated_at=db_now(),
            **({} if delay is not None else {"finished_at": db_now()}),
        ):
            return _reject(lease, "failure", scope.events)
        unit = FailedUnit(
            lease.kind,
            lease.unit_id,
            lease.step_id,
            lease.step_name,
            lease.item_key,
            error,
            lease.generation,
        )
        settle_failure(scope.advancer, unit, attempt=lease.attempt, delay=delay)
    return status


def settle_failure(
    advancer: Advancer, unit: FailedUnit, *, attempt: int, delay: timedelta | None
) -> None:
    """After a unit's row was moved to ``retry_scheduled`` (``delay`` given) or ``failed``:
    arm the retry timer, or apply the failure to its fan-out, its run or its unwinding."""
    if delay is None:
        unit.kind.settlement.failed(advancer, unit)
        return
    run = advancer.run
    due_at = timezone.now() + delay
    names_unit = {"step_id": unit.step_id, f"{unit.kind.timer_field}_id": unit.unit_id}
    Timer.objects.create(run_id=run.pk, kind=TimerKind.RETRY, due_at=due_at, **names_unit)
    advancer.events.add(
        run.pk,
        f"{unit.kind.name}.retry_scheduled",
        step_id=unit.step_id,
        attempt=attempt,
        due_at=due_at.isoformat(),
        error=unit.error["message"],
    )
