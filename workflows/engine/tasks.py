"""Task steps: entering one (ready for a worker, or claimed by the chaining worker) and
what a task's completion or final failure does to its run."""

from __future__ import annotations

from typing import Any

from workflows.definitions import Task
from workflows.engine.advance import Advancer, enters
from workflows.engine.claims import claim_in_scope
from workflows.engine.compensation import record_compensation
from workflows.engine.lease import Lease
from workflows.engine.sql import StepRow
from workflows.engine.work_kinds import STEP, FailedUnit, settles
from workflows.status import RUN_ACTIVE, StepStatus


@enters(Task)
def enter_task(advancer: Advancer, row: StepRow, node: Task) -> str:
    """Claim the task for the chaining worker, or make it ready for any worker."""
    advancer.mark_in_hand()
    if claim_in_scope(advancer.scope, STEP, row, step_id=row.pk, generation=row.generation):
        return StepStatus.RUNNING
    advancer.move(row, StepStatus.READY)
    advancer.events.add(advancer.run.pk, "step.ready", step_id=row.pk)
    advancer.dispatch(STEP, row.pk)
    return StepStatus.READY


@settles(STEP)
class TaskSettlement:
    """A task's completion releases its downstream steps; its final failure fails the run."""

    def completed(self, advancer: Advancer, lease: Lease, output: Any) -> None:
        run = advancer.run
        advancer.events.add(run.pk, "step.completed", step_id=lease.step_id, attempt=lease.attempt)
        if lease.node.compensate is not None:
            record_compensation(
                run,
                lease.step_id,
                lease.node,
                output,
                advancer.events,
                generation=lease.generation,
            )
        if run.status in RUN_ACTIVE:
            advancer.settled(lease.step_name)

    def failed(self, advancer: Advancer, unit: FailedUnit) -> None:
        advancer.events.add(
            advancer.run.pk,
            "step.failed",
            step_id=unit.step_id,
            error=unit.error["message"],
            attempt=unit.error.get("attempt"),
        )
        if advancer.run.status in RUN_ACTIVE:
            advancer.fail(unit.step_name, unit.error)

    def stopped(self, advancer: Advancer, unit: FailedUnit) -> None:
        advancer.events.add(
            advancer.run.pk,
            "step.cancelled",
            step_id=unit.step_id,
            reason=f"run {advancer.run.status}",
        )
