"""Task steps: entering one (ready for a worker, or claimed by the chaining worker) and
what a task's completion or final failure does to its run."""

from __future__ import annotations

from typing import Any

from workflows.definitions import Task
from workflows.engine.advance import Advancer, enters
from workflows.engine.claims import claim_in_scope, claim_pending_in_scope
from workflows.engine.lease import Lease
from workflows.engine.loops.polling import poll_again
from workflows.engine.nodes.compensation import CompletedUnit, record_compensation
from workflows.engine.sql.rows import StepRow
from workflows.engine.work_kinds import STEP, FailedUnit, settles
from workflows.status import RUN_ACTIVE, StepStatus


@enters(Task)
def enter_task(advancer: Advancer, row: StepRow, node: Task) -> str:
    """Claim the task for the chaining worker, or make it ready for any worker."""
    advancer.mark_in_hand()
    if claim_in_scope(
        advancer.scope,
        STEP,
        row,
        step_id=row.pk,
        generation=row.generation,
        iteration=row.iteration,
    ):
        return StepStatus.RUNNING
    advancer.move(row, StepStatus.READY)
    advancer.events.add(advancer.run.pk, "step.ready", step_id=row.pk)
    advancer.dispatch(STEP, row.pk, row.name)
    return StepStatus.READY


def _continue_chain(advancer: Advancer, completed: str) -> bool:
    """Claim the next task of a chain in one statement, if that is all that follows.

    When ``completed`` has a single downstream step, a task with no condition whose
    only upstream is ``completed``, graph evaluation can only enter it, and entering
    it means claiming it for the chaining worker: the claim by (run, name, ``pending``)
    does both without reading the step first. Returns ``False`` when the general
    evaluation (:meth:`Advancer.settled`) must run instead.
    """
    graph = advancer.workflow.graph
    following = graph.downstream[completed]
    if len(following) != 1 or graph.upstream[following[0]] != (completed,):
        return False
    node = advancer.workflow.nodes[following[0]]
    if node.when is not None or Advancer.entry_of(node) is not enter_task:
        return False
    if not claim_pending_in_scope(advancer.scope, STEP, following[0]):
        return False
    advancer.mark_in_hand()
    return True


@settles(STEP)
class TaskSettlement:
    """A task's completion releases its downstream steps; its final failure fails the run."""

    def completed(self, advancer: Advancer, lease: Lease, output: Any) -> None:
        run = advancer.run
        advancer.events.add(
            run.pk, "step.completed", step_id=lease.step_id, attempt=lease.attempt_in_round
        )
        node = lease.node
        if node.compensate is not None:  # else there is nothing to record
            record_compensation(advancer, node, output, CompletedUnit.of(lease))
        if run.status not in RUN_ACTIVE:
            return
        polling = isinstance(node, Task) and node.repeat_until is not None
        if polling and poll_again(advancer, lease):
            return
        if not _continue_chain(advancer, lease.step_name):
            advancer.settled(lease.step_name)

    def failed(self, advancer: Advancer, unit: FailedUnit) -> None:
        advancer.events.add(advancer.run.pk, "step.failed", step_id=unit.step_id, **unit.failure())
        if advancer.run.status in RUN_ACTIVE:
            advancer.fail(unit.step_name, unit.error)

    def stopped(self, advancer: Advancer, unit: FailedUnit) -> None:
        advancer.events.add(
            advancer.run.pk,
            "step.cancelled",
            step_id=unit.step_id,
            reason=f"run {advancer.run.status}",
        )
