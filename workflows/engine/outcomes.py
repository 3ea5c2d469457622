"""What becomes of an attempt of leased work: heartbeat, completion, failure.

Every write here is fenced by the worker's lease: a compare-and-set on (row, version,
attempt, owner, ``running``), and a heartbeat also on the lease being live on the
database clock. Losing a race never half-applies: the loser's write matches zero rows,
nothing is written but a ``lease.lost`` event saying its result was rejected, and it
gets :class:`~workflows.LeaseLost` (a heartbeat whose lease merely expired writes not
even that: :class:`~workflows.LeaseExpired`). A late duplicate of a completion that
committed is a no-op the :class:`Completion` reports. What a completion or a final
failure does to the run is the kind's :class:`~workflows.engine.work_kinds.Settlement`.

A batch of fan-out items (:class:`~workflows.engine.lease.LeaseBatch`) is heartbeaten
and recorded with set-based fenced writes (:func:`heartbeat_batch`,
:func:`record_batch`): each item is still fenced by its own attempt, and an item whose
lease was lost is rejected on its own while the others are recorded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.utils import timezone

from workflows.engine.advance import Advancer, error_from_exception
from workflows.engine.cancellation import stop_reason
from workflows.engine.events import EventLog
from workflows.engine.failures import classify, retried
from workflows.engine.lease import Held, Lease, LeaseBatch
from workflows.engine.limits.admission import free_attempt_slot
from workflows.engine.scope import RunScope, run_scope, unlocked_scope
from workflows.engine.sql.expressions import db_now, db_now_plus
from workflows.engine.sql.locked_updates import RowWrite
from workflows.engine.sql.updates import LIVE_LEASE, fenced_update_many
from workflows.engine.tags import commit_tags
from workflows.engine.transaction import transition
from workflows.engine.variables import commit_variables
from workflows.engine.wakeups import timer_armed
from workflows.engine.work_kinds import FailedUnit
from workflows.errors import LeaseExpired, LeaseLost, RunCancelled
from workflows.models import Timer
from workflows.status import FailureClass, StepStatus, TimerKind

_T = TypeVar("_T")


@dataclass
class _Rejected:
    """A fenced write matched no row: the reason, recorded as ``lease.lost`` unless the
    lease had only ``expired`` (nothing is recorded then)."""

    message: str
    expired: bool = False


@dataclass(frozen=True)
class Completion:
    """What a completion did: ``duplicate`` when the attempt had already completed with
    the same output (nothing was written this time); ``following``: the work claimed
    next for the same worker (``claim_next``), if any."""

    duplicate: bool = False
    following: Held | None = None


def _fenced(lease: Lease, *, live: bool = False, **changes: Any) -> RowWrite:
    """The compare-and-set of the leased row, fenced by (version, attempt, owner, running);
    ``live``: and by its lease not having expired on the database clock (a heartbeat)."""
    return RowWrite(
        lease.kind.model,
        lease.unit_id,
        lease.version,
        where={
            "attempt": lease.attempt,
            "lease_owner": lease.owner,
            "status": "running",
            **(LIVE_LEASE if live else {}),
        },
        changes=changes,
    )


def _fenced_update(lease: Lease, *, live: bool = False, **changes: Any) -> bool:
    """Compare-and-set the leased row (:func:`_fenced`); move the lease's version on."""
    updated = _fenced(lease, live=live, **changes).run()
    if updated:
        lease.version += 1
    return updated


def _failure(lease: Lease, exc: BaseException) -> tuple[dict[str, Any], timedelta | None]:
    """The ``error`` to record for an attempt that failed with ``exc``, carrying its
    failure class (:func:`~workflows.engine.failures.classify`), and the wait before the
    next attempt: ``None`` when its policy's ``retry_on`` leaves the class out or no
    attempt is left. A refused start (``engine.admission``) is never retried: the limit
    would refuse again."""
    failure_class = classify(exc, lease)
    error = error_from_exception(exc, attempt=lease.attempt, failure_class=failure_class.value)
    return error, lease.retry_delay() if retried(lease.retry, failure_class) else None


def _reject(lease: Lease, action: str, events: EventLog) -> _Rejected:
    """Record that ``lease`` no longer holds its work and say why; for a heartbeat whose
    lease only expired (:func:`_expired`), record nothing and say that."""
    row = (
        lease.kind.model.objects.filter(pk=lease.unit_id)
        .values("status", "attempt", "lease_owner", "version", "failure_class")
        .first()
    )
    current: dict[str, Any] = dict(row) if row is not None else {"status": "deleted"}
    failure_class = current.pop("failure_class", "")
    if action == "heartbeat" and _expired(lease, current, failure_class):
        return _Rejected(
            f"heartbeat of {lease.label} attempt {lease.attempt} by {lease.owner!r} "
            "rejected: its lease expired (the lease scanner takes the attempt back as "
            "lease_expired)",
            expired=True,
        )
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
        attempt=lease.attempt_in_round,
        owner=lease.owner,
        current=current,
    )
    return _Rejected(message)


def _expired(lease: Lease, current: dict[str, Any], failure_class: str) -> bool:
    """Whether a heartbeat of ``lease`` was fenced out only because its lease expired:
    the row is still exactly as the lease left it (so only the clock failed), or the
    reclaim already took this very attempt back as ``lease_expired``. Its ``lease.expired``
    event is then the attempt's record; the stalled worker adds none."""
    if current["status"] == "deleted" or current["attempt"] != lease.attempt:
        return False
    if current["status"] == StepStatus.RUNNING:
        return current["lease_owner"] == lease.owner and current["version"] == lease.version
    return failure_class == FailureClass.LEASE_EXPIRED


def _lost(rejected: _Rejected, lease: Lease) -> LeaseLost:
    error = LeaseExpired if rejected.expired else LeaseLost
    return error(rejected.message, step=lease.step_name, attempt=lease.attempt)


def _unless_rejected(outcome: _T | _Rejected, lease: Lease) -> _T:
    """The outcome of a fenced transition, or :class:`LeaseLost` if it was rejected."""
    if isinstance(outcome, _Rejected):
        raise _lost(outcome, lease)
    return outcome


def heartbeat(lease: Lease) -> None:
    """Extend the lease by the node's timeout, or raise :class:`LeaseLost`.

    The renewal rule: a lease is renewed only while it is live. A heartbeat after the
    lease expired raises :class:`LeaseExpired` (a ``LeaseLost``) even when no one has
    reclaimed the work yet, so a worker that stalled past its lease stops. It writes
    nothing, before the reclaim or after it (as long as no later attempt began): the
    reclaim's ``lease.expired`` is the attempt's record, and the worker only logs. The
    check is the database clock in the fenced ``UPDATE``'s ``WHERE`` (``lease_expires_at
    > now``, :data:`~.sql.updates.LIVE_LEASE`): no statement more than before for a
    heartbeat that succeeds; only a rejected one reads the row, to tell an expiry from a
    loss. A heartbeat also moves on the deadline the worker's
    watchdog holds the attempt to (``lease.renewed_at``).

    Cooperative cancel: once the run asks its attempts to stop (cancelling, cancelled,
    terminated, past its deadline: :mod:`workflows.engine.cancellation`), raises
    :class:`RunCancelled` (a ``LeaseLost``) instead, whether the lease is still held (a
    cancelled run leaves its attempts running) or a terminate took it. One read of the
    run after the fenced update, outside its transaction.
    """
    outcome = _heartbeat(lease)
    stop_if_cancelled(lease)
    _unless_rejected(outcome, lease)


def stop_if_cancelled(lease: Lease) -> None:
    """Raise :class:`RunCancelled` if ``lease``'s run asks its attempts to stop (one read)."""
    reason = stop_reason(lease.kind, lease.run_id)
    if reason is not None:
        raise RunCancelled(
            f"{lease.label} attempt {lease.attempt} asked to stop: {reason}",
            step=lease.step_name,
            attempt=lease.attempt,
            reason=reason,
        )


@transition
def _heartbeat(lease: Lease) -> _Rejected | None:
    renewed_at = time.monotonic()
    if _fenced_update(
        lease,
        live=True,
        lease_expires_at=db_now_plus(lease.node.effective_timeout),
        updated_at=db_now(),
    ):
        lease.renewed_at = renewed_at
        return None
    return _record_rejection(lease, "heartbeat")


def heartbeat_batch(batch: LeaseBatch, caller: Lease | None = None) -> None:
    """Extend every lease of ``batch`` by the node's timeout, in one statement.

    A batch's leases are renewed together: by any item's ``ctx.heartbeat()``, and by
    the worker between handlers once half the timeout has passed. An item whose lease
    was lost meanwhile (reclaimed after it expired, cancelled, terminated) does not
    match the fenced update: it is recorded as ``lease.lost`` and dropped from the
    batch, so this worker neither runs nor records it; one whose lease only expired is
    dropped too, with nothing recorded (:func:`heartbeat`'s renewal rule). Raises
    :class:`LeaseLost` (:class:`LeaseExpired`) when
    ``caller`` (the item whose handler heartbeats) was one of them, and
    :class:`RunCancelled` to a ``caller`` whose run asks it to stop, as :func:`heartbeat`.
    """
    if caller is not None and not batch.holds(caller):
        stop_if_cancelled(caller)
        raise LeaseLost(
            f"heartbeat of {caller.label} attempt {caller.attempt} rejected: its lease was "
            "lost before",
            step=caller.step_name,
            attempt=caller.attempt,
        )
    if not batch.leases:
        return
    renewed_at = time.monotonic()
    rejected = _heartbeat_batch(batch)
    batch.renewed_at = renewed_at
    for lease in batch.leases:
        lease.renewed_at = renewed_at
    if caller is not None:
        stop_if_cancelled(caller)
    for lease, rejection in rejected:
        if lease is caller:
            raise _lost(rejection, lease)


@transition
def _heartbeat_batch(batch: LeaseBatch) -> list[tuple[Lease, _Rejected]]:
    first = batch.first
    extended = fenced_update_many(
        first.kind.model,
        [lease.fence for lease in batch.leases],
        owner=first.owner,
        live=True,
        lease_expires_at=db_now_plus(first.node.effective_timeout),
        updated_at=db_now(),
    )
    with unlocked_scope() as scope:  # the leased rows alone, not their run
        rejected = _apply_fenced(batch.leases, extended, "heartbeat", scope.events)
    batch.leases = [lease for lease in batch.leases if lease.unit_id in extended]
    return rejected


def _apply_fenced(
    leases: Sequence[Lease], changed: set[int], action: str, events: EventLog
) -> list[tuple[Lease, _Rejected]]:
    """After a set-based fenced write: move on the versions of the leases it changed,
    record ``lease.lost`` for the others and return them with the reason."""
    rejected = []
    for lease in leases:
        if lease.unit_id in changed:
            lease.version += 1
        else:
            rejected.append((lease, _reject(lease, action, events)))
    return rejected


@transition
def record_lost_lease(lease: Lease, action: str) -> None:
    """Write the ``lease.lost`` event of a rejected ``action`` in a transaction of its own.

    For a rejection whose first record was rolled back with its caller's transaction:
    a transactional handler's attempt undoes the handler's writes, and the rejection
    with them, when its completion is fenced out.
    """
    _record_rejection(lease, action)


def _record_rejection(lease: Lease, action: str) -> _Rejected:
    with unlocked_scope() as scope:  # the lease alone, not its run
        return _reject(lease, action, scope.events)


def complete_work(lease: Lease, output: Any, *, claim_next: bool = False) -> Held | None:
    """Record the attempt's output and release the work that now can run.

    :func:`record_completion`, returning the work it claimed next (``None`` also for a
    duplicate, which wrote nothing).
    """
    return record_completion(lease, output, claim_next=claim_next).following


def record_completion(lease: Lease, output: Any, *, claim_next: bool = False) -> Completion:
    """Record the attempt's output and release the work that now can run.

    For a step, an item or a compensation alike. Fenced by the lease: if the work was
    reclaimed or cancelled meanwhile, the output is rejected, a ``lease.lost`` event is
    recorded and :class:`LeaseLost` raised. A late duplicate, this attempt having
    completed already with the same output (a completion retried after its commit was
    not acknowledged), is a harmless no-op: nothing is written and the
    :class:`Completion` says ``duplicate``. With ``claim_next`` the first task (or
    item, or batch of items) released is claimed for the same worker in the same
    transaction and its lease returned as the completion's ``following``.
    """
    return _unless_rejected(_complete(lease, output, claim_next), lease)


@transition
def _complete(lease: Lease, output: Any, claim_next: bool) -> Completion | _Rejected:
    owner = lease.owner if claim_next else None
    completion = _fenced(
        lease,
        status=StepStatus.COMPLETED,
        output=output,
        lease_expires_at=None,
        finished_at=db_now(),
        updated_at=db_now(),
    )
    # The fenced write is made with the run's lock (one statement on PostgreSQL).
    with run_scope(
        lease.run_id, workflow=lease.workflow, claim_owner=owner, write=completion
    ) as scope:
        if not scope.written:
            if _completed_with(lease, output):
                return Completion(duplicate=True)
            return _reject(lease, "completion", scope.events)
        commit_variables(scope, lease)
        commit_tags(scope, lease)
        lease.version += 1
        free_attempt_slot(scope, lease)
        lease.kind.settlement.completed(scope.advancer, lease, output)
    return Completion(following=scope.claimed)


def _completed_with(lease: Lease, output: Any) -> bool:
    """Whether ``lease``'s attempt already completed with ``output`` (one read, made only
    once its completion was fenced out)."""
    recorded = lease.kind.model.objects.filter(
        pk=lease.unit_id,
        attempt=lease.attempt,
        lease_owner=lease.owner,
        status=StepStatus.COMPLETED,
    ).values_list("output", flat=True)
    return any(stored == output for stored in recorded)


def fail_attempt(lease: Lease, exc: BaseException, *, quiet: bool = False) -> str:
    """Record a failed attempt: schedule a retry per policy, or fail the work for good.

    The attempt's failure class (:func:`~workflows.engine.failures.classify`) goes into
    the row's ``failure_class`` and ``error`` and into the event that records the
    failure, and decides with the policy's ``retry_on`` whether it is retried. Returns
    the new status (``retry_scheduled`` or ``failed``). A step failing for good fails
    its run; an item counts against its fan-out's tolerance; a compensation leaves its
    run ``compensation_failed``. Fenced like :func:`complete_work`; ``quiet``: a
    rejected write records no ``lease.lost`` either, for a caller that is not the
    handler's worker thread (the watchdog, which loses to the handler's own outcome,
    a reclaim or a revoke, each of which said so already).
    """
    error, delay = _failure(lease, exc)
    return _unless_rejected(_fail(lease, error, delay, quiet), lease)


@transition
def _fail(
    lease: Lease, error: dict[str, Any], delay: timedelta | None, quiet: bool = False
) -> str | _Rejected:
    with run_scope(lease.run_id, workflow=lease.workflow) as scope:
        outcome = _fail_row(scope, lease, error, delay, quiet=quiet)
        if isinstance(outcome, _Rejected):
            return outcome
        unit, delay = outcome
        settle_failure(scope.advancer, unit, attempt=lease.attempt_in_round, delay=delay)
    return StepStatus.RETRY_SCHEDULED if delay is not None else StepStatus.FAILED


def _fail_row(
    scope: RunScope,
    lease: Lease,
    error: dict[str, Any],
    delay: timedelta | None,
    *,
    quiet: bool = False,
) -> tuple[FailedUnit, timedelta | None] | _Rejected:
    """Move a failed attempt's row to ``retry_scheduled`` (``delay`` given, and the run
    may still start it) or ``failed``, fenced by the lease; say which by the delay.
    ``quiet``: a rejected write records no ``lease.lost``."""
    kind = lease.kind
    if scope.run.status not in kind.runs_while | kind.held_while:
        delay = None  # the run stopped meanwhile: no further attempt
    status = StepStatus.RETRY_SCHEDULED if delay is not None else StepStatus.FAILED
    finished: dict[str, Any] = {} if delay is not None else {"finished_at": db_now()}
    if not _fenced_update(
        lease,
        status=status,
        error=error,
        failure_class=error["failure_class"],
        lease_expires_at=None,
        updated_at=db_now(),
        **finished,
    ):
        if quiet:
            return _Rejected(f"failure of {lease.label} attempt {lease.attempt} rejected")
        return _reject(lease, "failure", scope.events)
    free_attempt_slot(scope, lease)
    unit = FailedUnit(
        lease.kind,
        lease.unit_id,
        lease.step_id,
        lease.step_name,
        lease.item_key,
        error,
        lease.generation,
        lease.iteration,
        lease.attempts_before,
    )
    return unit, delay


def record_batch(
    batch: LeaseBatch,
    completed: Sequence[tuple[Lease, Any]],
    failed: Sequence[tuple[Lease, BaseException]],
    *,
    claim_next: bool = False,
) -> tuple[Held | None, list[tuple[Lease, LeaseLost]]]:
    """Record the outcomes of a batch of items in one transaction.

    ``completed``: (lease, output) of the handlers that returned; ``failed``: (lease,
    exception) of those that raised. The completions are one set-based fenced
    compare-and-set; each failure is fenced on its own and retried or failed per the
    item's policy, as :func:`fail_attempt` does. Then the fan-out counts them and moves
    on once (the kind's :meth:`~workflows.engine.work_kinds.BatchSettlement.ended`).

    Races: an item whose lease was lost (reclaimed, cancelled, completed by another
    worker) matches nothing; it alone is rejected, with a ``lease.lost`` event, and
    returned with its :class:`LeaseLost`; the other items are recorded. Nothing commits if
    the transaction fails (a crash, an output the database refuses): every item of the
    batch then stays ``running`` under this worker's lease, exactly as claimed, and the
    leases' versions are put back. With ``claim_next`` the items the batch releases are
    claimed for the same worker in the same transaction and returned.
    """
    failures = [(lease, *_failure(lease, exc)) for lease, exc in failed]
    versions = [(lease, lease.version) for lease in batch.leases]
    try:
        following, rejected = _record_batch(completed, failures, claim_next)
    except BaseException:
        for lease, version in versions:
            lease.version = version
        raise
    return following, [(lease, _lost(rejection, lease)) for lease, rejection in rejected]


@transition
def _record_batch(
    completed: Sequence[tuple[Lease, Any]],
    failures: Sequence[tuple[Lease, dict[str, Any], timedelta | None]],
    claim_next: bool,
) -> tuple[Held | None, list[tuple[Lease, _Rejected]]]:
    lease = completed[0][0] if completed else failures[0][0]
    owner = lease.owner if claim_next else None
    with run_scope(lease.run_id, workflow=lease.workflow, claim_owner=owner) as scope:
        recorded = fenced_update_many(
            lease.kind.model,
            [done.fence for done, _ in completed],
            owner=lease.owner,
            values=[output for _, output in completed],
            value_field="output",
            status=StepStatus.COMPLETED,
            lease_expires_at=None,
            finished_at=db_now(),
            updated_at=db_now(),
        )
        rejected = _apply_fenced(
            [done for done, _ in completed], recorded, "completion", scope.events
        )
        ended = []
        for failed, error, delay in failures:
            outcome = _fail_row(scope, failed, error, delay)
            if isinstance(outcome, _Rejected):
                rejected.append((failed, outcome))
                continue
            unit, delay = outcome
            if delay is None:
                ended.append(unit)
            else:
                schedule_retry(scope.advancer, unit, attempt=failed.attempt_in_round, delay=delay)
        done = [(item, output) for item, output in completed if item.unit_id in recorded]
        for item, _ in done:
            commit_variables(scope, item)
            commit_tags(scope, item)
        if done or ended:
            lease.kind.batch_settlement.ended(scope.advancer, done, ended)
    return scope.claimed, rejected


def settle_failure(
    advancer: Advancer, unit: FailedUnit, *, attempt: int, delay: timedelta | None
) -> None:
    """After a unit's row was moved to ``retry_scheduled`` (``delay`` given) or ``failed``:
    arm the retry timer, or apply the failure to its fan-out, its run or its unwinding."""
    if delay is None:
        unit.kind.settlement.failed(advancer, unit)
        return
    schedule_retry(advancer, unit, attempt=attempt, delay=delay)


def schedule_retry(advancer: Advancer, unit: FailedUnit, *, attempt: int, delay: timedelta) -> None:
    """Arm the retry timer of a unit just moved to ``retry_scheduled``."""
    run = advancer.run
    due_at = timezone.now() + delay
    names_unit = {"step_id": unit.step_id, f"{unit.kind.timer_field}_id": unit.unit_id}
    Timer.objects.create(run_id=run.pk, kind=TimerKind.RETRY, due_at=due_at, **names_unit)
    timer_armed(due_at)
    advancer.events.add(
        run.pk,
        f"{unit.kind.name}.retry_scheduled",
        step_id=unit.step_id,
        attempt=attempt,
        due_at=due_at.isoformat(),
        error=unit.error["message"],
        failure_class=unit.error.get("failure_class", ""),
    )
