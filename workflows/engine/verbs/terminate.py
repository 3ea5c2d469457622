"""Terminating a run: a hard stop, without compensation.

Unlike :func:`~workflows.engine.verbs.operator.cancel_run`, which waits for running
work and then undoes what completed, a terminated run ends at once: unstarted steps are
cancelled, running attempts lose their lease (their late results are rejected by the
fence, and recorded as ``lease.lost``), compensations that have not run are skipped,
and every timer is cancelled. Child runs are terminated afterwards, each in its own
transition (a child is always locked before its parent).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.definitions import FanOut
from workflows.engine.events import EventLog, actor
from workflows.engine.guards import TERMINATE
from workflows.engine.runs import set_run_status, stop_forward_work
from workflows.engine.scope import run_scope
from workflows.engine.sql.counters import bump_item_counter
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.updates import cas_update_many
from workflows.engine.transaction import transition
from workflows.models import CompensationRecord, FanOutItem, Run, Step, Timer
from workflows.status import CompensationStatus, RunStatus, StepStatus, TimerStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

_LEASE_RELEASED: dict[str, Any] = {"lease_owner": "", "lease_expires_at": None}
_UNFINISHED_COMPENSATION = (
    CompensationStatus.PENDING,
    CompensationStatus.READY,
    CompensationStatus.RUNNING,
    CompensationStatus.RETRY_SCHEDULED,
)


@transition
def terminate_run(run_id: UUID, *, reason: str = "", user: AnyUser | None = None) -> None:
    """Stop a run now, without compensation; its running attempts lose their lease.

    Accepts active, paused and unwinding runs. A worker finishing an attempt of this
    run after the commit matches nothing with its fenced write and gets ``LeaseLost``.
    Works on a run whose definition is no longer registered.
    """
    with run_scope(run_id, needs_definition=False) as scope:
        run, events = scope.run, scope.events
        TERMINATE.check(run_id, run.status)
        stop_forward_work(run, events, reason="run terminated")
        error = {"code": "terminated", "message": reason or "terminated", "by": actor(user)}
        if run.status == RunStatus.COMPENSATING:
            error["cause"] = run.error  # it was failing: keep why, it is still a failure
        _take_running_work(run, events, error)
        skipped = cas_update_many(
            CompensationRecord,
            where={"run_id": run.pk, "status": _UNFINISHED_COMPENSATION},
            status=CompensationStatus.SKIPPED,
            updated_at=db_now(),
            **_LEASE_RELEASED,
        )
        if skipped:
            events.add(run.pk, "compensations.skipped", count=len(skipped), reason="terminated")
        cas_update_many(
            Timer,
            where={"run_id": run.pk, "status": TimerStatus.SCHEDULED},
            status=TimerStatus.CANCELLED,
        )
        set_run_status(run, RunStatus.TERMINATED, events, error=error, paused_reason="")
        events.add(run.pk, "run.terminate_requested", by=actor(user), reason=reason)


def _take_running_work(run: Run, events: EventLog, error: dict[str, Any]) -> None:
    """Running steps end ``cancelled``, running and waiting fan-out items ``skipped``,
    their leases released: a late result of theirs is refused by the fence."""
    stopped = cas_update_many(
        Step,
        where={"run_id": run.pk, "status": StepStatus.RUNNING},
        returning=("id", "name"),
        status=StepStatus.CANCELLED,
        error=error,
        finished_at=db_now(),
        updated_at=db_now(),
        **_LEASE_RELEASED,
    )
    for step_id, name in sorted(stopped):
        events.add(run.pk, "step.cancelled", step_id=step_id, step=name, reason="terminated")
    fanouts = list(
        Step.objects.filter(run_id=run.pk, kind=FanOut.kind).values_list("id", flat=True)
    )
    if fanouts:
        items = cas_update_many(
            FanOutItem,
            where={"step_id": fanouts, "status": (StepStatus.RUNNING, StepStatus.WAITING)},
            returning=("step_id",),
            status=StepStatus.SKIPPED,
            error=error,
            finished_at=db_now(),
            updated_at=db_now(),
            **_LEASE_RELEASED,
        )
        for step_id, count in sorted(Counter(step_id for (step_id,) in items).items()):
            bump_item_counter(step_id, "items_skipped", count)
            events.add(run.pk, "items.skipped", step_id=step_id, count=count, reason="terminated")
