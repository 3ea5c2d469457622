"""Changing a run's priority: an operator verb.

``Run.priority`` orders a queued run in its workflow's queue, and every unit of work
carries a ``priority`` of its own, copied when the unit was written: the node's own
``priority=`` if it declares one, else the run's. So a change moves the run and the
work it has not started yet; work already running keeps the priority it was claimed
with, and units whose node declares a priority keep theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.engine.events import actor
from workflows.engine.guards import PRIORITY
from workflows.engine.runs import update_locked_run
from workflows.engine.scope import run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.updates import cas_update_many
from workflows.engine.transaction import transition
from workflows.models import CompensationRecord, FanOutItem, Run, Step
from workflows.status import CompensationStatus, StepStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

# Units that have not started: their priority still decides when they are claimed.
UNSTARTED = (StepStatus.PENDING, StepStatus.READY, StepStatus.RETRY_SCHEDULED)
_UNSTARTED_COMPENSATION = (
    CompensationStatus.PENDING,
    CompensationStatus.READY,
    CompensationStatus.RETRY_SCHEDULED,
)


@dataclass(frozen=True)
class PriorityChange:
    """What a change did: the run's priority before and after, and how many unstarted
    steps, fan-out items and compensations now carry the new one."""

    run: UUID
    previous: int
    priority: int
    steps: int = 0
    items: int = 0
    compensations: int = 0


def following_run(snapshot: dict[str, Any]) -> list[str]:
    """The steps of a run's snapshot whose node declares no priority of its own.

    Read from the snapshot, not the registered class, so the verb works on a run whose
    definition is gone.
    """
    return [step["name"] for step in snapshot.get("steps", []) if step.get("priority") is None]


@transition
def change_priority(run_id: UUID, priority: int, *, user: AnyUser | None = None) -> PriorityChange:
    """Set the run's priority and that of its unstarted work; event ``run.priority_changed``.

    The run is locked, so the change and any transition of the run are serialised.
    Claims do not take the run lock: each set-based update restates the statuses it
    changes (pending, ready, retry scheduled), so a unit a worker claimed a moment ago
    keeps its old priority, and only the rows actually changed are counted. A change to
    the priority the run already has writes nothing.
    """
    with run_scope(run_id, needs_definition=False) as scope:
        run = scope.run
        PRIORITY.check(run_id, run.status)
        previous, snapshot = Run.objects.values_list("priority", "snapshot").get(pk=run.pk)
        if previous == priority:
            return PriorityChange(run.pk, previous, priority)
        _set_run_priority(run, priority)
        names = following_run(snapshot)
        # An empty IN () is not SQL everywhere.
        units = _set_units_priority(run, names, priority) if names else (0, 0, 0)
        change = PriorityChange(run.pk, previous, priority, *units)
        scope.events.add(
            run.pk,
            "run.priority_changed",
            by=actor(user),
            steps=change.steps,
            items=change.items,
            compensations=change.compensations,
            **{"from": previous, "to": priority},
        )
        return change


def _set_run_priority(run: Run, priority: int) -> None:
    """Compare-and-set the run's priority at the status and version read under its lock."""
    update_locked_run(run, "its priority was set", priority=priority)


def _set_units_priority(run: Run, names: list[str], priority: int) -> tuple[int, int, int]:
    """Give the unstarted steps ``names`` of the run, their items and compensations the
    new priority: how many of each changed."""
    changes: dict[str, Any] = {"priority": priority, "updated_at": db_now()}
    steps = cas_update_many(
        Step, where={"run_id": run.pk, "name": names, "status": UNSTARTED}, **changes
    )
    step_ids = list(Step.objects.filter(run_id=run.pk, name__in=names).values_list("id", flat=True))
    items = cas_update_many(FanOutItem, where={"step_id": step_ids, "status": UNSTARTED}, **changes)
    compensations = cas_update_many(
        CompensationRecord,
        where={"run_id": run.pk, "step_id": step_ids, "status": _UNSTARTED_COMPENSATION},
        **changes,
    )
    return len(steps), len(items), len(compensations)
