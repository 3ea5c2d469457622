"""Saga compensation: records written with each completion, run in reverse order.

A completed step (or fan-out item) whose node declares ``compensate=`` writes its
CompensationRecord in the same transaction as its completion, with the next sequence
number of its run. When the run unwinds (see :func:`workflows.engine.runs.unwind`) the
records run one at a time, highest sequence first, each a leased unit retried with the
project's default retry policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import Max

from workflows.definitions import LeasedNode, Workflow
from workflows.definitions.nodes import default_retry
from workflows.engine.events import EventLog
from workflows.engine.work_kinds import COMPENSATION, FailedUnit, settles
from workflows.models import CompensationRecord, Run

if TYPE_CHECKING:
    from workflows.engine.advance import Advancer
    from workflows.engine.lease import Lease


def record_compensation(
    run: Run,
    step_id: int,
    node: LeasedNode,
    output: Any,
    events: EventLog,
    *,
    workflow: type[Workflow],
    generation: int,
    iteration: int,
    item: Any = None,
    item_id: int | None = None,
    item_key: str = "",
) -> None:
    """Write the record that would undo this completion (caller holds the run lock).

    ``generation`` (the step's, bumped by each rerun) and ``iteration`` (moved on by a
    loop) keep the compensation's idempotency key that of the work it undoes, even after
    the step was rerun or went round again; ``item_key`` names the item it undoes when
    the item's row is gone (a loop's next round deletes them).
    """
    last = CompensationRecord.objects.filter(run_id=run.pk).aggregate(last=Max("sequence"))
    sequence = (last["last"] or 0) + 1
    record = CompensationRecord.objects.create(
        run_id=run.pk,
        step_id=step_id,
        item_id=item_id,
        handler=node.compensate_path,
        payload={
            "step": node.name,
            "output": output,
            "item": item,
            "item_key": item_key,
            "generation": generation,
            "iteration": iteration,
        },
        sequence=sequence,
        max_attempts=default_retry().max_attempts,
        **workflow.unit_columns(node.name, run.priority),
    )
    events.add(
        run.pk, "compensation.recorded", step_id=step_id, compensation=record.pk, sequence=sequence
    )


@settles(COMPENSATION)
class CompensationSettlement:
    """A compensation that ends lets the run unwind on (the next record, or its end)."""

    def completed(self, advancer: Advancer, lease: Lease, output: Any) -> None:
        advancer.events.add(
            advancer.run.pk,
            "compensation.completed",
            step_id=lease.step_id,
            compensation=lease.unit_id,
        )

    def failed(self, advancer: Advancer, unit: FailedUnit) -> None:
        advancer.events.add(
            advancer.run.pk,
            "compensation.failed",
            step_id=unit.step_id,
            error=unit.error["message"],
            attempt=unit.error.get("attempt"),
            failure_class=unit.error.get("failure_class", ""),
        )

    # A compensation reclaimed after its run stopped unwinding has failed.
    stopped = failed
