"""Transitions that repair what crashes and lost messages leave behind.

Each takes one unit or run, re-checks it under its own compare-and-set and returns
whether it acted; the scanners in :mod:`workflows.workers.scanners` find the candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models.functions import Now

from workflows.definitions import LeasedNode
from workflows.definitions.limits import Route
from workflows.engine.failures import retried
from workflows.engine.lease import Lease
from workflows.engine.limits.admission import attempt_ended
from workflows.engine.limits.slots import Holder
from workflows.engine.runs import unwind
from workflows.engine.scope import RunScope, run_scope, unlocked_scope
from workflows.engine.sql.expressions import attempts_plus, db_now
from workflows.engine.sql.updates import cas_update, fenced_update_many
from workflows.engine.transaction import transition
from workflows.engine.work_kinds import FailedUnit, WorkKind
from workflows.errors import DefinitionMissing
from workflows.models import CompensationRecord, FanOutItem, Step
from workflows.status import RUN_ACTIVE, RUN_UNWINDING, FailureClass, StepStatus

# How long after its lease ran out the lease scanner leaves a unit to the worker that
# holds it: the worker's watchdog records an attempt that overran its timeout as
# ``timeout`` at the moment the lease runs out (both are a whole timeout from the last
# renewal), and should not lose that race to the scanner by a few milliseconds. A
# crashed worker's work is taken back this much later.
RECLAIM_GRACE = timedelta(seconds=2)

# A row of leased work, whichever its kind.
Leased = Step | FanOutItem | CompensationRecord


@dataclass(frozen=True)
class _Owners:
    """Where a unit of leased work belongs: its run and step (and item key)."""

    run_id: UUID
    step_id: int
    step_name: str
    item_key: str
    generation: int


def _owners(kind: WorkKind, unit_id: int) -> _Owners:
    model = kind.model
    if issubclass(model, Step):
        run_id, name, generation = model.objects.values_list("run_id", "name", "generation").get(
            pk=unit_id
        )
        return _Owners(run_id, unit_id, name, "", generation)
    unit = model.objects.select_related("step").get(pk=unit_id)
    step = unit.step
    return _Owners(step.run_id, step.pk, step.name, getattr(unit, "key", ""), step.generation)


def reclaim(
    kind: WorkKind, unit_id: int, *, now: datetime | None = None, wait: bool = True
) -> str | None:
    """Take back running work whose lease expired before ``now`` (default: the database
    clock less :data:`RECLAIM_GRACE`).

    The expired attempt counts, with failure class ``lease_expired``: the work goes back
    to ``ready`` for another attempt, or fails for good when it has used its attempts or
    its retry policy's ``retry_on`` leaves ``lease_expired`` out. Work of a run that
    stopped meanwhile ends in its kind's ``stopped_status`` instead. Returns the new
    status, or ``None`` when the work was not reclaimable (its worker finished or
    heartbeat first).
    """
    return _reclaim(kind, unit_id, now, wait)


@transition
def _reclaim(kind: WorkKind, unit_id: int, now: datetime | None, wait: bool) -> str | None:
    expired = kind.model.objects.filter(
        pk=unit_id,
        status=StepStatus.RUNNING,
        lease_expires_at__lt=now if now is not None else Now() - RECLAIM_GRACE,
    ).first()
    if expired is None:
        return None
    owners = _owners(kind, unit_id)
    run_id, step_id = owners.run_id, owners.step_id
    with run_scope(run_id, wait=wait) as scope:
        active = scope.run.status in kind.runs_while
        status = _after_expiry(scope, kind, expired, owners.step_name)
        # A step numbers its attempts within its round (items and compensations have
        # none); the error's ``attempt`` counts across rounds, as the fence does.
        before = expired.round_attempts_before if isinstance(expired, Step) else 0
        error = _expiry_error(kind, expired, owners, before)
        # The version guard also catches a heartbeat that extended the lease since the read.
        if not cas_update(
            kind.model,
            unit_id,
            version=expired.version,
            where={"status": StepStatus.RUNNING},
            status=status,
            error=error,
            failure_class=FailureClass.LEASE_EXPIRED,
            lease_owner="",
            lease_expires_at=None,
            updated_at=db_now(),
            **({} if status == StepStatus.READY else {"finished_at": db_now()}),
        ):
            return None
        attempt_ended(scope, Holder(kind.name, unit_id, expired.attempt))
        scope.events.add(
            run_id,
            "lease.expired",
            step_id=step_id,
            kind=kind.name,
            attempt=expired.attempt - before,
            owner=expired.lease_owner,
            failure_class=FailureClass.LEASE_EXPIRED.value,
        )
        advancer = scope.advancer
        unit = FailedUnit(
            kind,
            unit_id,
            step_id,
            owners.step_name,
            owners.item_key,
            error,
            owners.generation,
            attempts_before=before,
        )
        if status == StepStatus.READY:
            scope.events.add(run_id, f"{kind.name}.ready", step_id=step_id)
            if active:
                advancer.dispatch(kind, unit_id, owners.step_name)
        elif status == StepStatus.FAILED:
            kind.settlement.failed(advancer, unit)
        else:
            kind.settlement.stopped(advancer, unit)
    return status


def _after_expiry(scope: RunScope, kind: WorkKind, expired: Leased, step_name: str) -> str:
    """The status a unit whose lease expired moves to: its kind's stopped status in a run
    that stopped, ``failed`` when no attempt is left for it, else ``ready`` (a paused
    run's unit waits there for the resume)."""
    run_status = scope.run.status
    if run_status not in kind.runs_while and run_status not in kind.held_while:
        return kind.stopped_status
    if expired.attempt >= expired.max_attempts or not _retries_expiry(scope, kind, step_name):
        return StepStatus.FAILED
    return StepStatus.READY


def _expiry_error(kind: WorkKind, expired: Leased, owners: _Owners, before: int) -> dict[str, Any]:
    """The error of the expired attempt (numbered within its round in the message)."""
    return {
        "code": "lease_expired",
        "message": f"attempt {expired.attempt - before} of "
        f"{kind.label(owners.step_name, owners.item_key)} by "
        f"{expired.lease_owner!r} did not finish within its lease",
        "attempt": expired.attempt,
        "failure_class": FailureClass.LEASE_EXPIRED.value,
    }


def _retries_expiry(scope: RunScope, kind: WorkKind, step_name: str) -> bool:
    """Whether the unit's retry policy retries a ``lease_expired`` attempt: its node's
    ``retry_on`` (a compensation's is the default). A run whose definition is gone keeps
    today's rule: retried while attempts remain."""
    try:
        node = scope.workflow.nodes.get(step_name)
    except DefinitionMissing:
        return True
    if not isinstance(node, LeasedNode):
        return True
    return retried(kind.retry_of(node), FailureClass.LEASE_EXPIRED)


@transition
def return_unstarted(leases: Sequence[Lease]) -> set[int]:
    """Give back the items of a batch whose leases ran out before their worker started
    them, without counting the attempt.

    A batch's items are claimed together and run one after another; when one of them
    runs past the whole lease, the renewal before the next is refused (a lease is renewed
    only while live) and the items behind it were never run. The reclaim would count
    their attempt as ``lease_expired``: an item could fail for good, or use up its
    retries, without its handler ever being called. Their worker knows better, and while
    it still holds their attempt (the fence: row, version, attempt, owner, ``running``)
    it puts them back to ``ready`` with the attempt the claim added taken off, records
    ``item.returned`` and sends them to the executor again. An item already reclaimed,
    cancelled or otherwise changed does not match and is left as it is; so are all of
    them in a run that stopped, whose unwinding waits for their reclaim. Returns the ids
    given back.
    """
    if not leases:
        return set()
    first = leases[0]
    kind = first.kind
    with run_scope(first.run_id) as scope:
        status = scope.run.status
        if status not in kind.runs_while and status not in kind.held_while:
            return set()
        returned = fenced_update_many(
            kind.model,
            [lease.fence for lease in leases],
            owner=first.owner,
            status=StepStatus.READY,
            attempt=attempts_plus(-1),
            lease_owner="",
            lease_expires_at=None,
            updated_at=db_now(),
        )
        for lease in leases:
            if lease.unit_id not in returned:
                continue
            attempt_ended(scope, Holder(kind.name, lease.unit_id, lease.attempt))
            scope.events.add(
                lease.run_id,
                "item.returned",
                step_id=lease.step_id,
                item=lease.item_key,
                attempt=lease.attempt,
                owner=lease.owner,
            )
            scope.events.add(lease.run_id, f"{kind.name}.ready", step_id=lease.step_id)
            if status in kind.runs_while:
                scope.advancer.dispatch(kind, lease.unit_id, lease.step_name)
    return returned


@transition
def redispatch(kind: WorkKind, unit_id: int, *, ready_before: datetime) -> bool:
    """Send ready work nobody claimed since ``ready_before`` to the executor again.

    The compare-and-set touches ``updated_at`` so the work is not re-sent on every scan;
    it loses (returns ``False``) when a worker claimed it meanwhile.
    """
    row = (
        kind.model.objects.filter(
            pk=unit_id, status=StepStatus.READY, updated_at__lt=ready_before, held_on=""
        )
        .only("id", "version", "queue", "requires")
        .first()
    )
    if row is None or not cas_update(
        kind.model,
        row.pk,
        version=row.version,
        where={"status": StepStatus.READY},
        updated_at=db_now(),
    ):
        return False
    owners = _owners(kind, row.pk)
    with unlocked_scope() as scope:  # the unit alone: its run is not locked
        scope.events.add(
            owners.run_id, f"{kind.name}.redispatched", step_id=owners.step_id, unit=row.pk
        )
        scope.dispatch(kind, row.pk, Route.of_row(row.queue, row.requires))
    return True


@transition
def repair_run(run_id: UUID, *, wait: bool = True) -> bool:
    """Re-evaluate a run that has nothing in flight; return whether it changed.

    An active run: releases pending steps whose upstreams are all final and settles its
    status (running, waiting, completed); a run whose definition is gone fails with
    ``definition_missing``. An unwinding run: releases its next compensation or ends.
    """
    with run_scope(run_id, wait=wait) as scope:
        run = scope.run
        if run.status in RUN_UNWINDING:
            unwind(run, scope.events)
        elif run.status in RUN_ACTIVE:
            scope.advancer.release_stranded()
            scope.finish()
        if not scope.events:
            return False
        scope.events.add(run.pk, "run.repaired")
    return True
