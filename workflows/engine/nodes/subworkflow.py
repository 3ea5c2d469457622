"""Child runs: started by ``SubWorkflow`` steps (and fan-out items), reported back on end.

Lock order is always child, then parent: a child's final transition locks its parent to
report; a parent that stops cancels its children in separate transitions after its own
commits (:func:`cancel_children`), never while holding its own lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from uuid import UUID

from workflows.definitions import SubWorkflow
from workflows.engine.advance import Advancer, enters
from workflows.engine.events import EventLog
from workflows.engine.guards import CANCEL
from workflows.engine.nodes.fanout import settle_child_item
from workflows.engine.runs import when_run_ends
from workflows.engine.scope import nested_scope
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.start import start_child
from workflows.engine.verbs.cancel import cancel_run
from workflows.engine.verbs.terminate import terminate_run
from workflows.errors import ChildRunFailed, DefinitionMissing, InvalidInput, WorkflowError
from workflows.models import Run
from workflows.status import RUN_ALIVE, RUN_FINAL, RUN_UNWINDING, RunStatus, StepStatus

logger = logging.getLogger("workflows.engine")


@enters(SubWorkflow)
def enter_subworkflow(advancer: Advancer, row: StepRow, node: SubWorkflow) -> str:
    """Start the child run and wait for it (or settle at once if it already ended)."""
    try:
        data = (
            node.input(advancer.context_for(row)) if node.input is not None else advancer.run.input
        )
        child = start_child(advancer, node.workflow, data, step_id=row.pk)
    except (DefinitionMissing, InvalidInput, TypeError, ValueError, KeyError) as exc:
        return advancer.fail_entering(row, exc, "child_error")
    if child.status in RUN_FINAL:
        return _settle_step(advancer, row, child)
    advancer.park(row, "", None, reason="child", child=str(child.pk))
    return StepStatus.WAITING


@when_run_ends
def notify_parent(child: Run, events: EventLog) -> None:
    """Report a child's end to its parent step or item, in the child's transition."""
    if child.parent_run_id is None:
        return
    parent = nested_scope(child.parent_run_id, events)
    if parent is None:
        return  # the parent's definition is gone: it was failed instead
    advancer = parent.advancer  # the parent moves on even if its step no longer waits
    if child.parent_item_id is not None:
        settle_child_item(advancer, child, child.parent_item_id)
    elif child.parent_step_id is not None:
        row = step_row(child.parent_step_id)
        if row.status == StepStatus.WAITING and _settle_step(advancer, row, child) == (
            StepStatus.COMPLETED
        ):
            advancer.settled(row.name)
    parent.close()


def _settle_step(advancer: Advancer, row: StepRow, child: Run) -> str:
    if child.status == RunStatus.COMPLETED:
        return advancer.complete(row, child.output, child=str(child.pk))
    return advancer.fail_entering(row, ChildRunFailed.of(child), "child_failed")


def cancel_children(run_id: UUID) -> int:
    """Cancel the children of a run that stopped (each a cancel accepts: running, waiting,
    paused, queued), each in its own transition."""
    return _stop_children(
        run_id, CANCEL.accepts, lambda child_id: cancel_run(child_id, reason="parent run stopped")
    )


def terminate_children(run_id: UUID) -> int:
    """Terminate the unfinished children of a terminated run, and theirs, each in its own
    transition (a child is always locked before its parent, never while it is held)."""

    def terminate(child_id: UUID) -> None:
        terminate_run(child_id, reason="parent run terminated")
        terminate_children(child_id)

    return _stop_children(run_id, RUN_ALIVE | RUN_UNWINDING, terminate)


def _stop_children(run_id: UUID, statuses: frozenset[str], stop: Callable[[UUID], object]) -> int:
    children = Run.objects.filter(parent_run_id=run_id, status__in=statuses)
    stopped = 0
    for child_id in children.values_list("id", flat=True):
        try:
            stop(child_id)
        except WorkflowError as exc:  # the child ended meanwhile
            logger.info(
                "child run %s not stopped: %s", child_id, exc, extra={"run_id": str(child_id)}
            )
        else:
            stopped += 1
    return stopped
