"""Child runs: started by ``SubWorkflow`` steps (and fan-out items), reported back on end.

Lock order is always child, then parent: a child's final transition locks its parent to
report; a parent that stops cancels its children in separate transitions after its own
commits (:mod:`workflows.engine.verbs.children`), never while holding its own lock.
"""

from __future__ import annotations

from workflows.definitions import SubWorkflow
from workflows.engine.advance import Advancer, enters
from workflows.engine.events import EventLog
from workflows.engine.nodes.fanout import settle_child_item
from workflows.engine.runs import when_run_ends
from workflows.engine.scope import nested_scope
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.start import start_child
from workflows.errors import ChildRunFailed, DefinitionMissing, InvalidInput
from workflows.models import Run
from workflows.status import RUN_FINAL, RunStatus, StepStatus
from workflows.tags import checked_tags


@enters(SubWorkflow)
def enter_subworkflow(advancer: Advancer, row: StepRow, node: SubWorkflow) -> str:
    """Start the child run and wait for it (or settle at once if it already ended)."""
    try:
        data = (
            node.input(advancer.context_for(row)) if node.input is not None else advancer.run.input
        )
        tags = node.tags(advancer.context_for(row)) if callable(node.tags) else node.tags
        child = start_child(
            advancer,
            node.workflow,
            data,
            step_id=row.pk,
            tags=None if tags is None else checked_tags(tags, field="SubWorkflow tags"),
        )
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
