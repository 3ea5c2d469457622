"""Child runs: started by ``SubWorkflow`` steps and fan-out items, reported back on end.

Lock order is always child, then parent: a child's final transition locks its parent to
report; a parent that stops cancels its children in separate transitions after its own
commits (:func:`cancel_children`), never while holding its own lock.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.definitions import SubWorkflow, registry
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.sql import StepRow, lock_run, step_row
from workflows.errors import DefinitionMissing, InvalidInput, WorkflowError
from workflows.models import Run
from workflows.status import RUN_ACTIVE, RUN_FINAL, RunStatus, StepStatus

if TYPE_CHECKING:
    from workflows.engine.advance import Advancer

logger = logging.getLogger("workflows.engine")


def start_child(
    advancer: Advancer,
    workflow_name: str,
    data: dict[str, Any],
    *,
    step_id: int,
    item_id: int | None = None,
) -> Run:
    """Create a child run inside the parent's transition; its ready work joins the parent's."""
    from workflows.engine.start import create_run

    definition = registry.latest(workflow_name)
    child, ready = create_run(
        definition,
        definition.check_input(data),
        advancer.events,
        parent=advancer.run,
        parent_step_id=step_id,
        parent_item_id=item_id,
    )
    advancer.ready_work.extend(ready)
    advancer.events.add(
        advancer.run.pk, "child.started", step_id=step_id, child=str(child.pk), item=item_id
    )
    return child


def enter_subworkflow(advancer: Advancer, row: StepRow, node: SubWorkflow) -> str:
    """Start the child run and wait for it (or settle at once if it already ended)."""
    try:
        data = node.input(advancer.context) if node.input is not None else advancer.run.input
        child = start_child(advancer, node.workflow, data, step_id=row.pk)
    except (DefinitionMissing, InvalidInput, TypeError, ValueError, KeyError) as exc:
        return advancer.fail_entering(row, exc, "child_error")
    if child.status in RUN_FINAL:
        return _settle_step(advancer, row, child)
    advancer.park(row, "", None, reason="child", child=str(child.pk))
    return StepStatus.WAITING


def notify_parent(child: Run, events: EventLog) -> None:
    """Report a child's end to its parent step or item (called in the child's transition)."""
    from workflows.engine import items
    from workflows.engine.advance import Advancer

    parent = lock_run(child.parent_run_id)
    try:
        workflow = registry.get(parent.workflow_name, parent.workflow_version)
    except DefinitionMissing as missing:
        from workflows.engine.runs import fail_run

        fail_run(parent, missing.as_dict(), events)
        return
    advancer = Advancer(parent, workflow, events)
    if child.parent_item_id is not None:
        items.settle_child_item(advancer, child)
    elif child.parent_step_id is not None:
        row = step_row(child.parent_step_id)
        if row.status == StepStatus.WAITING and _settle_step(advancer, row, child) == (
            StepStatus.COMPLETED
        ):
            advancer.settled(row.name)
    advancer.finish()
    enqueue(advancer.ready_work)


def _settle_step(advancer: Advancer, row: StepRow, child: Run) -> str:
    if child.status == RunStatus.COMPLETED:
        return advancer.complete(row, child.output, child=str(child.pk))
    return advancer.fail_entering(row, ChildRunFailed.of(child), "child_failed")


class ChildRunFailed(WorkflowError):
    """The child run did not complete."""

    code = "child_failed"

    @classmethod
    def of(cls, child: Run) -> ChildRunFailed:
        cause = (child.error or {}).get("message", "")
        return cls(
            f"child run {child.pk} ({child.workflow_name}) ended {child.status}"
            + (f": {cause}" if cause else ""),
            child=str(child.pk),
            status=child.status,
        )


def active_children(run_id: UUID) -> list[UUID]:
    return list(
        Run.objects.filter(parent_run_id=run_id, status__in=RUN_ACTIVE).values_list("id", flat=True)
    )


def cancel_children(run_id: UUID) -> int:
    """Cancel the active children of a run that stopped; each in its own transition."""
    from workflows.engine.operator import cancel_run

    cancelled = 0
    for child_id in active_children(run_id):
        try:
            cancel_run(child_id, reason="parent run stopped")
        except WorkflowError as exc:  # the child ended meanwhile
            logger.info("child run %s not cancelled: %s", child_id, exc)
        else:
            cancelled += 1
    return cancelled
