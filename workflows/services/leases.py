"""Revoke a lease: take a running attempt away from a wedged worker, now.

What every surface calls (``workflows.revoke_lease``, the console's "Revoke lease", ``POST
/api/steps/{id}/revoke/``, ``workflows_revoke``). It names the unit of leased work from
what the caller has — a step, a fan-out item, a compensation record, or a step and the
key of one of its items or its compensation — and hands it to the engine's transition
(:func:`workflows.engine.verbs.revoke.revoke_lease`), which decides.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from workflows.engine.verbs import revoke
from workflows.engine.verbs.revoke import RevokedLease
from workflows.engine.work_kinds import COMPENSATION, ITEM, STEP, WorkKind
from workflows.errors import InvalidInput, StepNotFound
from workflows.models import CompensationRecord, FanOutItem, Step
from workflows.services.targets import step_of
from workflows.status import CompensationStatus, RoundAttempts
from workflows.validation import check_text

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

LeasedUnit = Step | FanOutItem | CompensationRecord


__all__ = [
    "LeasedUnit",
    "RevokedLease",
    "not_revoked_text",
    "revoke_lease",
    "shown_attempts",
    "unit_of",
]

# Why the named attempt was not revoked, as every surface words it after "attempt N of X".
_NOT_REVOKED = {
    revoke.ALREADY_REVOKED: "was revoked already (a repeated request)",
    revoke.REPLACED: "was replaced by a newer attempt, which was left alone",
    revoke.NOT_STARTED: "has not started",
    revoke.NOT_LEASED: "is no longer running",
}


def shown_attempts(unit: LeasedUnit) -> RoundAttempts:
    """A unit's attempt and budget as every surface numbers them, and as a revoke takes
    them: a step's within its round, an item's or a compensation's as they are."""
    if isinstance(unit, Step):
        return unit.attempts_in_round
    return RoundAttempts(unit.attempt, unit.max_attempts)


def not_revoked_text(result: RevokedLease) -> str:
    """Why ``result`` revoked nothing, to follow "attempt N of <unit>"."""
    return _NOT_REVOKED.get(result.reason or "", "was not revoked")


def revoke_lease(
    unit: LeasedUnit | int,
    *,
    expected_attempt: int,
    expected_round: int | None = None,
    item: str | None = None,
    compensation: bool = False,
    reason: str = "",
    user: AnyUser | None = None,
) -> RevokedLease:
    """Take the lease of attempt ``expected_attempt`` now, if it is still running; the
    work goes back to ``ready`` and runs again, without using up an attempt.

    Pinned: ``expected_attempt`` is the attempt the caller saw, numbered as every surface
    shows it: a step's within its round (``step.attempts_in_round``; a rerun, a retry or
    a loop's next iteration starts a new round at attempt 1), an item's or a
    compensation's as it is. ``expected_round`` pins a step's round too (``step.round``;
    ``None``: its current round). When the unit is no longer in that attempt, or it is
    not running, nothing changes: a double click or a retried request never revokes the
    attempt that replaced the wedged one. Returns a :class:`RevokedLease`: ``revoked``
    (this call took the lease), ``reason`` when it did not (``replaced``,
    ``not_started``, ``already_revoked``, ``not_leased``), ``attempt`` and ``unit``,
    read again.

    ``unit``: a task step (or its id), a fan-out item or a compensation record. With a
    step, ``item="key"`` names one of its fan-out items and ``compensation=True`` its
    running compensation (that of item ``item``, if given). ``reason`` is kept in the
    run's history with ``user`` (``None``: trusted code, recorded as the system); like
    the other step verbs, a named user is the actor recorded, and the surfaces check
    ``workflows.operate_run`` of a signed-in one (:mod:`workflows.services.access`).

    The worker that held the lease learns of it at its next ``ctx.heartbeat()``
    (``LeaseLost``); its late result is refused and recorded as ``lease.lost``. Refused
    with :class:`InvalidTransition` for a fan-out step (its items hold the leases) or a
    run that cannot have running work; :class:`StepNotFound` when the step, item or
    compensation does not exist; :class:`InvalidInput` for a bad reason or attempt, or
    options that do not fit ``unit``.
    """
    check_text(reason, field="revoke reason")
    kind, unit_id = unit_of(unit, item, compensation)
    result = revoke.revoke_lease(
        kind,
        unit_id,
        expected_attempt=expected_attempt,
        expected_round=expected_round,
        reason=reason,
        user=user,
    )
    return replace(result, unit=kind.model.objects.get(pk=unit_id))


def unit_of(unit: LeasedUnit | int, item: str | None, compensation: bool) -> tuple[WorkKind, int]:
    """The kind and id of the unit of leased work the caller names: ``unit`` itself (an
    item, a compensation record), or a step, one of its items (``item``) or its running
    or latest compensation (``compensation``, of ``item`` if given)."""
    if isinstance(unit, FanOutItem | CompensationRecord):
        if item is not None or compensation:
            raise InvalidInput(
                "item= and compensation= name a unit of a step; pass the step, not "
                f"{'an item' if isinstance(unit, FanOutItem) else 'a compensation record'}"
            )
        return (ITEM if isinstance(unit, FanOutItem) else COMPENSATION), unit.pk
    step = step_of(unit)
    if compensation:
        return COMPENSATION, _compensation_of(step, item)
    if item is not None:
        check_text(item, field="item key")
        found = FanOutItem.objects.filter(step_id=step.pk, key=item).values_list("pk", flat=True)
        if not found:
            raise StepNotFound(f"step {step.name!r} has no item {item!r}", step=step.pk, item=item)
        return ITEM, found[0]
    return STEP, step.pk


def _compensation_of(step: Step, item: str | None) -> int:
    """The step's running compensation (of ``item``), else its latest one: the engine
    then says why it cannot be revoked."""
    records = CompensationRecord.objects.filter(step_id=step.pk)
    if item is not None:
        check_text(item, field="item key")
        records = records.filter(item__key=item)
    ids = records.values_list("pk", flat=True)
    found = list(ids.filter(status=CompensationStatus.RUNNING)[:1])
    found = found or list(ids.order_by("-sequence")[:1])
    if not found:
        of_item = f" of item {item!r}" if item is not None else ""
        raise StepNotFound(
            f"step {step.name!r} has no compensation{of_item}", step=step.pk, item=item
        )
    return found[0]
