"""Revoke a lease: an operator takes a running attempt away from its worker, now.

For a worker that is wedged but still heartbeating, so its lease never expires: the
lease scanner would wait for ever, and terminating the run would throw the rest of the
run away. The unit (a task step, a fan-out item or a compensation) goes back to
``ready`` at once and is dispatched again; the revoked attempt's heartbeat, writes and
result are then refused by the fence they already carry (``LeaseLost``, recorded as
``lease.lost``).

Pinned to the attempt the caller saw (``expected_attempt``, numbered as every surface
shows it: a step's within its round, with ``expected_round`` to pin the round too), not
to the one running when the call arrives, nor to the owner: the operator does not hold
the lease and should not have to copy the worker's name. A double click or a client's
retry that arrives after attempt N ended, or after attempt N + 1 replaced it, changes
nothing and says so (:class:`RevokedLease` with ``revoked=False`` and a reason), so it
can never take the fresh attempt that replaced the wedged one. The compare-and-set names
(id, version, attempt, ``running``). A revoke gives the attempt back (``max_attempts`` +
1): the operator stopped it, the work did not fail, so a step with one attempt left
still has it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from workflows.definitions import FanOut
from workflows.definitions.limits import Route
from workflows.engine.events import actor
from workflows.engine.guards import REVOKE
from workflows.engine.limits.admission import attempt_ended
from workflows.engine.limits.slots import Holder
from workflows.engine.scope import RunScope, run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.updates import cas_update
from workflows.engine.transaction import transition
from workflows.engine.work_kinds import COMPENSATION, ITEM, STEP, FailedUnit, WorkKind
from workflows.errors import InvalidInput, InvalidTransition, StaleState
from workflows.status import FailureClass, StepStatus

if TYPE_CHECKING:
    from uuid import UUID

    from django.db.models import Model

    from workflows.permissions import AnyUser

# Why a pinned revoke changed nothing (``RevokedLease.reason``).
REPLACED: Final = "replaced"  # a newer attempt (or round) started: not the one the caller saw
NOT_STARTED: Final = "not_started"  # attempt N has not started (yet)
ALREADY_REVOKED: Final = "already_revoked"  # attempt N was revoked already (a repeat)
NOT_LEASED: Final = "not_leased"  # attempt N ended (completed, failed, expired, cancelled)


@dataclass(frozen=True)
class RevokedLease:
    """What a pinned revoke did.

    ``revoked``: this call took the lease of attempt ``attempt`` (the one the caller named,
    numbered within the step's round). ``False``: nothing changed, and ``reason`` says
    why: ``replaced`` (the unit is in a newer attempt now), ``not_started`` (attempt
    ``attempt`` never started), ``already_revoked`` (a repeat of a revoke that took it)
    or ``not_leased`` (the attempt ended otherwise). ``unit``: the step, item or
    compensation record as it is after the call (filled by
    :func:`workflows.services.revoke_lease`).
    """

    revoked: bool
    reason: str | None
    attempt: int
    unit: Model | None = None


# What a revoke reads of a unit's owners, by kind: run, step id, step name, generation,
# the step's node kind, and the item's key (none for a step itself).
_OWNERS: dict[str, tuple[str, ...]] = {
    STEP.name: ("run_id", "id", "name", "generation", "kind"),
    ITEM.name: ("step__run_id", "step_id", "step__name", "step__generation", "step__kind", "key"),
    COMPENSATION.name: (
        "run_id",
        "step_id",
        "step__name",
        "step__generation",
        "step__kind",
        "item__key",
    ),
}
_UNIT = (
    "status",
    "attempt",
    "max_attempts",
    "version",
    "lease_owner",
    "queue",
    "requires",
    "failure_class",
    "error",
)
_ROUNDS = ("round", "round_attempts_before")  # a step's, read after _UNIT


@dataclass(frozen=True)
class LeasedRow:
    """A unit of leased work as the operator verbs on one unit (revoke, fail) read it."""

    run_id: UUID
    step_id: int
    step_name: str
    generation: int
    step_kind: str
    item_key: str
    status: str
    attempt: int
    max_attempts: int
    version: int
    lease_owner: str
    queue: str
    requires: str
    failure_class: str
    error: Any
    # A step's round and the attempts made before it (items and compensations have no
    # rounds: 1 and 0).
    round: int = 1
    attempts_before: int = 0

    def label(self, kind: WorkKind) -> str:
        return kind.label(self.step_name, self.item_key)

    def failed(self, kind: WorkKind, unit_id: int, error: dict[str, Any]) -> FailedUnit:
        """This unit as its kind's settlement takes a unit that ended with ``error``."""
        return FailedUnit(
            kind,
            unit_id,
            self.step_id,
            self.step_name,
            self.item_key,
            error,
            self.generation,
            attempts_before=self.attempts_before,
        )

    @property
    def attempt_in_round(self) -> int:
        return self.attempt - self.attempts_before


def read_unit(kind: WorkKind, unit_id: int, *, locked: bool = False) -> LeasedRow:
    """The unit and its owners; ``locked``: its row only, until the transition commits
    (PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises every writer already)."""
    owners = _OWNERS[kind.name]
    rows = kind.model.objects.filter(pk=unit_id)
    if locked:
        rows = rows.select_for_update(no_key=True, of=("self",))
    rounds = _ROUNDS if kind is STEP else ()
    row = rows.values_list(*owners, *_UNIT, *rounds).get()
    if kind is STEP:  # a step has no item key
        row = (*row[: len(owners)], "", *row[len(owners) :])
    run_id, step_id, step_name, generation, step_kind, item_key, *unit = row
    return LeasedRow(run_id, step_id, step_name, generation, step_kind, item_key or "", *unit)


FANOUT_HOLDS_NO_LEASE = "a fan-out step holds no lease itself; revoke one of its running items"


def revoke_refusal(kind: WorkKind, status: str, step_kind: str, run_status: str) -> str | None:
    """Why a unit of ``kind`` in ``status`` (of a step of node kind ``step_kind``) of a
    run in ``run_status`` has no lease to revoke, or ``None``: what a bulk's dry run asks."""
    if kind is STEP and step_kind == FanOut.kind:
        return FANOUT_HOLDS_NO_LEASE
    return REVOKE.refusal(status, run_status, noun=kind.name)


def run_of_unit(kind: WorkKind, unit_id: int) -> UUID:
    """The run a unit of leased work belongs to (never changes: read before the lock)."""
    return read_unit(kind, unit_id).run_id


@transition
def revoke_lease(
    kind: WorkKind,
    unit_id: int,
    *,
    expected_attempt: int,
    expected_round: int | None = None,
    reason: str = "",
    user: AnyUser | None = None,
) -> RevokedLease:
    """Take the lease of attempt ``expected_attempt`` of unit ``unit_id`` of ``kind`` if
    that attempt is still running; say what happened (:class:`RevokedLease`).

    The unit goes to ``ready`` (dispatched again; a paused run's unit waits for the
    resume), or, when the run has stopped meanwhile and can no longer start the unit (a
    cancelling or failing run's forward work), to the kind's stopped status, which lets
    the run's unwinding go on instead of waiting for the wedged worker. The attempt is
    given back (``max_attempts`` + 1), recorded with class ``revoked`` in the row and its
    ``error``, and in a ``lease.revoked`` event with who, why, the attempt and the worker
    that held it. Its concurrency slot is freed as a finished attempt's is.

    ``expected_attempt`` is numbered as every surface shows it: a step's attempts within
    its round (a rerun, a retry or a loop's next iteration starts a new round at 1),
    ``expected_round`` pinning the round too (``None``: the step's current one); items
    and compensations have no rounds. When the unit is no longer in that attempt, or it
    is not running, nothing is written and the result has ``revoked=False`` and the
    reason.
    Refused with :class:`InvalidTransition` for a fan-out step (its items hold the
    leases) and when the run is not one that may have running work; with
    :class:`InvalidInput` for an attempt below 1. How it loses a race: a completion or
    failure of the attempt takes the run's lock as this does, so whichever commits first
    wins; a losing revoke sees the attempt ended (``not_leased``), a losing worker's
    write is refused with ``LeaseLost`` and recorded as ``lease.lost``. Racing revokes of
    the same attempt queue on the run's lock: the first takes the lease, the others see
    it taken (``already_revoked``), so ``max_attempts`` grows once. A heartbeat takes no
    run lock: the revoke locks the unit's row before reading it, so a heartbeat in
    between waits and then finds its fence gone (``LeaseLost``); on SQLite the write
    lock serialises them anyway.
    """
    _check_pins(expected_attempt, expected_round)
    with run_scope(run_of_unit(kind, unit_id)) as scope:
        unit, missed = _pinned(kind, unit_id, expected_attempt, expected_round)
        if missed is not None:
            return RevokedLease(False, missed, expected_attempt)
        status = _target(scope, kind, unit)
        error = _error(kind, unit, reason, user)
        _take(kind, unit_id, unit, status, error)
        _revoked(scope, kind, unit_id, unit, status, error)
    return RevokedLease(True, None, expected_attempt)


def _check_pins(expected_attempt: object, expected_round: object) -> None:
    """:class:`InvalidInput` unless the attempt (and the round, if given) are numbers."""
    if isinstance(expected_attempt, bool) or not isinstance(expected_attempt, int):
        raise InvalidInput("expected_attempt must be an attempt number (an integer)")
    if expected_attempt < 1:
        raise InvalidInput(f"expected_attempt must be 1 or more, not {expected_attempt}")
    if expected_round is not None and (
        isinstance(expected_round, bool) or not isinstance(expected_round, int)
    ):
        raise InvalidInput("expected_round must be a round number (an integer)")


def _pinned(
    kind: WorkKind, unit_id: int, expected_attempt: int, expected_round: int | None
) -> tuple[LeasedRow, str | None]:
    """The unit under the run's lock, and why the pinned attempt cannot be revoked
    (``None``: it runs, and the unit's row is locked too)."""
    # A plain read first. An attempt that is not running now never runs again (only a
    # claim starts one, the next), so a revoke that misses answers from it and locks
    # nothing: its row lock would make a worker claiming the unit's next attempt at that
    # instant skip the row as being claimed (SKIP LOCKED) and drop its nudge, leaving the
    # unit ready until the redispatch.
    unit = read_unit(kind, unit_id)
    if kind is STEP and unit.step_kind == FanOut.kind:
        raise InvalidTransition(
            f"{unit.label(kind)}: {FANOUT_HOLDS_NO_LEASE}", status=unit.status, verb=REVOKE.name
        )
    missed = _missed(unit, expected_attempt, expected_round)
    if missed is None:
        # Locked after the run, as every transition orders its locks: a heartbeat
        # (which takes no run lock) waits for this commit, then finds its fence gone.
        unit = read_unit(kind, unit_id, locked=True)
        missed = _missed(unit, expected_attempt, expected_round)
    return unit, missed


def _take(
    kind: WorkKind, unit_id: int, unit: LeasedRow, status: str, error: dict[str, Any]
) -> None:
    """The compare-and-set that takes the lease: the attempt given back, the unit moved
    to ``status``; :class:`StaleState` when it moved meanwhile."""
    if not cas_update(
        kind.model,
        unit_id,
        version=unit.version,
        where={"status": StepStatus.RUNNING, "attempt": unit.attempt},
        status=status,
        error=error,
        failure_class=FailureClass.REVOKED,
        max_attempts=unit.max_attempts + 1,
        lease_owner="",
        lease_expires_at=None,
        updated_at=db_now(),
        **({} if status == StepStatus.READY else {"finished_at": db_now()}),
    ):
        raise StaleState(f"{unit.label(kind)} changed while being revoked; nothing changed")


def _missed(unit: LeasedRow, expected: int, expected_round: int | None) -> str | None:
    """Why attempt ``expected`` (of round ``expected_round``, or the current one) of the
    unit cannot be revoked now, or ``None``: it runs."""
    if expected_round is not None and unit.round != expected_round:
        return REPLACED if unit.round > expected_round else NOT_STARTED
    if unit.attempt_in_round > expected:
        return REPLACED
    if unit.attempt_in_round < expected:
        return NOT_STARTED
    if unit.status == StepStatus.RUNNING:
        return None
    error = unit.error if isinstance(unit.error, dict) else {}
    if unit.failure_class == FailureClass.REVOKED and error.get("attempt") == unit.attempt:
        return ALREADY_REVOKED
    return NOT_LEASED


def _target(scope: RunScope, kind: WorkKind, unit: LeasedRow) -> str:
    """The status the revoked unit moves to, or :class:`InvalidTransition`."""
    label = unit.label(kind)
    refusal = REVOKE.refusal(unit.status, scope.run.status, noun=kind.name)
    if refusal is not None:
        raise InvalidTransition(f"{label}: {refusal}", status=unit.status, verb=REVOKE.name)
    run_status = scope.run.status
    if run_status in kind.runs_while or run_status in kind.held_while:
        return StepStatus.READY
    return kind.stopped_status


def _error(kind: WorkKind, unit: LeasedRow, reason: str, user: AnyUser | None) -> dict[str, Any]:
    by = actor(user)
    message = (
        f"attempt {unit.attempt_in_round} of {unit.label(kind)} by {unit.lease_owner!r} revoked"
        + (f" by {by}" if by else "")
        + (f": {reason}" if reason else "")
    )
    return {
        "code": "revoked",
        "message": message,
        "by": by,
        "reason": reason,
        "attempt": unit.attempt,
        "owner": unit.lease_owner,
        "failure_class": FailureClass.REVOKED.value,
    }


def operator_event(
    kind: WorkKind, unit_id: int, unit: LeasedRow, error: dict[str, Any]
) -> dict[str, Any]:
    """What an operator verb's event says of the unit it acted on: its step, kind, id and
    item, the attempt (within the step's round), and who did it and why."""
    return {
        "step_id": unit.step_id,
        "kind": kind.name,
        "unit": unit_id,
        **({"item": unit.item_key} if unit.item_key else {}),
        "attempt": unit.attempt_in_round,
        "by": error["by"],
        "reason": error["reason"],
    }


def _revoked(
    scope: RunScope,
    kind: WorkKind,
    unit_id: int,
    unit: LeasedRow,
    status: str,
    error: dict[str, Any],
) -> None:
    """After the compare-and-set: free the slot, record it, and start the work again."""
    run = scope.run
    attempt_ended(scope, Holder(kind.name, unit_id, unit.attempt))
    scope.events.add(
        run.pk,
        "lease.revoked",
        **operator_event(kind, unit_id, unit, error),
        owner=unit.lease_owner,
        failure_class=FailureClass.REVOKED.value,
        status=status,
    )
    if status == StepStatus.READY:
        scope.events.add(run.pk, f"{kind.name}.ready", step_id=unit.step_id)
        if run.status in kind.runs_while:  # a paused run's unit waits for the resume
            scope.dispatch(kind, unit_id, Route.of_row(unit.queue, unit.requires))
        return
    kind.settlement.stopped(scope.advancer, unit.failed(kind, unit_id, error))
