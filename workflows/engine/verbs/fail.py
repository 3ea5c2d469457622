"""Fail stuck work: an operator ends a step, a fan-out item or a compensation as failed, now.

For work that will not end by itself in time: ready work no worker will ever serve (a
queue nobody runs, an external task nobody claims), a retry that is known to fail again,
an attempt wedged behind a worker that still heartbeats. :mod:`~.revoke` gives such an
attempt another try; this ends the unit instead, exactly as its last attempt failing for
good would (:func:`workflows.engine.outcomes.fail_attempt`): a step fails its run (which
compensates), an item counts against its fan-out's tolerance, a compensation leaves its
run ``compensation_failed``. The error says who failed it and why (code
``failed_by_operator``, class ``permanent``), and a ``unit.failed_by_operator`` event
records it besides the kind's own ``<kind>.failed``.

Pinned, as a revoke is, to what the caller saw: the attempt (numbered within the step's
round, 0 for work never started; ``expected_round`` pins the round) and, if given, the
status. A unit that moved on since (claimed, retried, completed) is refused with
:class:`InvalidTransition` saying so, never overwritten; this is what fences each unit of
a bulk as if it were failed alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.definitions import FanOut
from workflows.engine.events import actor
from workflows.engine.guards import FAIL_STEP
from workflows.engine.limits.admission import attempt_ended
from workflows.engine.limits.slots import Holder
from workflows.engine.scope import RunScope, run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.updates import cas_update, cas_update_many
from workflows.engine.transaction import transition
from workflows.engine.verbs.revoke import operator_event, read_unit, run_of_unit
from workflows.engine.work_kinds import STEP, WorkKind
from workflows.errors import InvalidInput, InvalidTransition, StaleState
from workflows.models import Timer
from workflows.status import FailureClass, StepStatus, TimerKind, TimerStatus

if TYPE_CHECKING:
    from workflows.engine.verbs.revoke import LeasedRow
    from workflows.permissions import AnyUser

FAILED_BY_OPERATOR = "failed_by_operator"


@transition
def fail_unit(
    kind: WorkKind,
    unit_id: int,
    *,
    expected_attempt: int,
    expected_round: int | None = None,
    expected_status: str | None = None,
    reason: str = "",
    user: AnyUser | None = None,
) -> None:
    """End unit ``unit_id`` of ``kind`` as failed, if it is still where the caller saw it.

    Accepts ready, retry-scheduled and running work (:data:`~workflows.engine.guards.FAIL_STEP`)
    of a run that may still run it: forward work of an active or paused run, a
    compensation of an unwinding one. A running attempt loses its lease (its late
    heartbeat and result are refused, ``LeaseLost``) and frees its concurrency slot; a
    retry's timer is cancelled. Refused with :class:`InvalidTransition` for a fan-out
    step (fail its items), for work in another status or run, and when the unit is no
    longer in attempt ``expected_attempt`` (of round ``expected_round``) or status
    ``expected_status``. How it loses a race: a claim, a completion or a failure of the
    unit takes the run's lock as this does, so whichever commits first wins; a losing
    fail sees the unit moved on and is refused; a losing worker's write is refused with
    ``LeaseLost``. A heartbeat takes no run lock: the unit's row is locked before it is
    read, so a heartbeat in between waits and then finds its fence gone.
    """
    if isinstance(expected_attempt, bool) or not isinstance(expected_attempt, int):
        raise InvalidInput("expected_attempt must be an attempt number (an integer)")
    if expected_attempt < 0:
        raise InvalidInput(f"expected_attempt must be 0 or more, not {expected_attempt}")
    with run_scope(run_of_unit(kind, unit_id)) as scope:
        unit = read_unit(kind, unit_id, locked=True)
        _check(scope, kind, unit, expected_attempt, expected_round, expected_status)
        error = _error(kind, unit, reason, user)
        if not cas_update(
            kind.model,
            unit_id,
            version=unit.version,
            where={"status": unit.status, "attempt": unit.attempt},
            status=StepStatus.FAILED,
            error=error,
            failure_class=FailureClass.PERMANENT,
            lease_owner="",
            lease_expires_at=None,
            finished_at=db_now(),
            updated_at=db_now(),
        ):
            raise StaleState(f"{unit.label(kind)} changed while being failed; nothing changed")
        _failed(scope, kind, unit_id, unit, error)


def _check(
    scope: RunScope,
    kind: WorkKind,
    unit: LeasedRow,
    expected_attempt: int,
    expected_round: int | None,
    expected_status: str | None,
) -> None:
    """:class:`InvalidTransition` unless the unit is still as the caller saw it and the
    verb's rule accepts it."""
    label = unit.label(kind)

    def refuse(reason: str) -> InvalidTransition:
        return InvalidTransition(f"{label}: {reason}", status=unit.status, verb=FAIL_STEP.name)

    moved = (expected_round is not None and unit.round != expected_round) or (
        unit.attempt_in_round != expected_attempt
    )
    if moved:
        raise refuse(
            f"it is in attempt {unit.attempt_in_round} now, not {expected_attempt}: "
            "it moved on since it was read, and was left alone"
        )
    if expected_status is not None and unit.status != expected_status:
        raise refuse(
            f"it is {unit.status} now, not {expected_status}: it moved on since it was "
            "read, and was left alone"
        )
    refusal = fail_refusal(kind, unit.status, unit.step_kind, scope.run.status)
    if refusal is not None:
        raise refuse(refusal)


def fail_refusal(kind: WorkKind, status: str, step_kind: str, run_status: str) -> str | None:
    """Why a unit of ``kind`` in ``status`` (of a step of node kind ``step_kind``) of a
    run in ``run_status`` cannot be failed, or ``None``: the verb's rule, which a bulk's
    dry run asks too."""
    if kind is STEP and step_kind == FanOut.kind:
        return "a fan-out step holds no work itself; fail its items"
    refusal = FAIL_STEP.refusal(status, run_status, noun=kind.name)
    if refusal is None and run_status not in kind.runs_while | kind.held_while:
        return (
            f"run is {run_status}; {kind.name}s are failed only while their run may still "
            "run them (revoke or terminate stop the work of a stopping run)"
        )
    return refusal


def _error(kind: WorkKind, unit: LeasedRow, reason: str, user: AnyUser | None) -> dict[str, Any]:
    by = actor(user)
    message = (
        f"{unit.label(kind)} failed by an operator"
        + (f" ({by})" if by else "")
        + (f": {reason}" if reason else "")
        + f" while {unit.status}"
    )
    return {
        "code": FAILED_BY_OPERATOR,
        "message": message,
        "by": by,
        "reason": reason,
        "attempt": unit.attempt,
        "failure_class": FailureClass.PERMANENT.value,
    }


def _failed(
    scope: RunScope, kind: WorkKind, unit_id: int, unit: LeasedRow, error: dict[str, Any]
) -> None:
    """After the compare-and-set: free what the unit held, record it, settle the failure
    as the kind settles a last failed attempt."""
    run = scope.run
    if unit.status == StepStatus.RUNNING:
        attempt_ended(scope, Holder(kind.name, unit_id, unit.attempt))
    if unit.status == StepStatus.RETRY_SCHEDULED:
        cas_update_many(
            Timer,
            where={
                f"{kind.timer_field}_id": unit_id,
                "kind": TimerKind.RETRY,
                "status": TimerStatus.SCHEDULED,
            },
            status=TimerStatus.CANCELLED,
        )
    scope.events.add(
        run.pk,
        "unit.failed_by_operator",
        **operator_event(kind, unit_id, unit, error),
        status=unit.status,
    )
    kind.settlement.failed(scope.advancer, unit.failed(kind, unit_id, error))
