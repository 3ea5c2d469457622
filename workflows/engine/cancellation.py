"""Cooperative cancel: whether a running attempt's run has asked it to stop.

A cancelled run lets its running attempts finish (their results are recorded and
compensated); a terminated one fences them out; a run past its deadline fails. In each
case a handler doing long work would rather stop now than finish work nobody wants:
``ctx.cancel_requested`` asks, and ``ctx.heartbeat()`` raises
:class:`~workflows.errors.RunCancelled` (:func:`workflows.engine.outcomes.heartbeat`).

Forward work (a task step, a fan-out item) is asked to stop once its run is
``cancelling``, ``cancelled`` or ``terminated``, or past its deadline (the deadline has
come by the database clock, or the run already failed with ``deadline_exceeded``).
A compensation is asked to stop only once its run is terminated: compensations are
what a cancelled run, or one that missed its deadline, runs next, so they must not
stop for the very reason they were started.

One indexed read of the run's row per question, never cached: a handler polls it in a
loop and must see a cancel that commits between two polls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Q
from django.db.models.functions import Now

from workflows.engine.runs import DEADLINE_EXCEEDED
from workflows.engine.work_kinds import COMPENSATION, ITEM, STEP, WorkKind
from workflows.models import Run
from workflows.status import RunStatus

if TYPE_CHECKING:
    from uuid import UUID

# Run statuses that ask forward work to stop.
STOPPING = frozenset({RunStatus.CANCELLING, RunStatus.CANCELLED, RunStatus.TERMINATED})

_FORWARD = (
    Q(status__in=STOPPING)
    | Q(deadline__lte=Now())
    | Q(status__in=(RunStatus.COMPENSATING, RunStatus.FAILED), error__code=DEADLINE_EXCEEDED)
)
# What makes a run ask an attempt of each kind of work to stop.
_STOPS: dict[str, Q] = {
    STEP.name: _FORWARD,
    ITEM.name: _FORWARD,
    COMPENSATION.name: Q(status=RunStatus.TERMINATED),
}


def stop_reason(kind: WorkKind, run_id: UUID) -> str | None:
    """Why run ``run_id`` asks its running attempts of ``kind`` to stop (``"run is
    cancelling"``, ``"run is past its deadline"``), or ``None``: one query."""
    status = (
        Run.objects.filter(_STOPS[kind.name], pk=run_id).values_list("status", flat=True).first()
    )
    if status is None:
        return None
    if status in STOPPING:
        return f"run is {status}"
    return "run is past its deadline"


def cancel_requested(kind: WorkKind, run_id: UUID) -> bool:
    """Whether run ``run_id`` asks its running attempts of ``kind`` to stop: one query."""
    return stop_reason(kind, run_id) is not None
