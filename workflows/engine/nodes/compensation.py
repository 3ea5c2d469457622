"""Saga compensation: records written with each completion, run in reverse order.

A completed step (or fan-out item) whose node declares ``compensate=`` writes its
CompensationRecord in the same transaction as its completion, with the next sequence
number of its run. When the run unwinds (see :func:`workflows.engine.runs.unwind`) the
records run one at a time, highest sequence first, each a leased unit retried with the
project's default retry policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import Max

from workflows.definitions import LeasedNode
from workflows.definitions.nodes import default_retry
from workflows.engine.work_kinds import COMPENSATION, ITEM, FailedUnit, settles
from workflows.models import CompensationRecord

if TYPE_CHECKING:
    from workflows.engine.advance import Advancer
    from workflows.engine.lease import Lease


@dataclass(frozen=True)
class CompletedUnit:
    """The completion a compensation record undoes: the step, the step's ``generation``
    (bumped by each rerun) and ``iteration`` (moved on by a loop), and for a fan-out
    item its value, row and key."""

    step_id: int
    generation: int
    iteration: int
    item: Any = None
    item_id: int | None = None
    item_key: str = ""

    @classmethod
    def of(cls, lease: Lease) -> CompletedUnit:
        """The unit of ``lease`` (a step's or an item's) that just completed."""
        if lease.kind is not ITEM:
            return cls(lease.step_id, lease.generation, lease.iteration)
        return cls(
            lease.step_id,
            lease.generation,
            lease.iteration,
            lease.item,
            lease.unit_id,
            lease.item_key,
        )


def record_compensation(
    advancer: Advancer, node: LeasedNode, output: Any, unit: CompletedUnit
) -> None:
    """Write the record that would undo this completion, when ``node`` declares
    ``compensate=`` (caller holds the run lock).

    The unit's generation and iteration keep the compensation's idempotency key that of
    the work it undoes, even after the step was rerun or went round again; its
    ``item_key`` names the item it undoes when the item's row is gone (a loop's next
    round deletes them).
    """
    if node.compensate is None:
        return
    run, events, step_id = advancer.run, advancer.events, unit.step_id
    last = CompensationRecord.objects.filter(run_id=run.pk).aggregate(last=Max("sequence"))
    sequence = (last["last"] or 0) + 1
    record = CompensationRecord.objects.create(
        run_id=run.pk,
        step_id=step_id,
        item_id=unit.item_id,
        handler=node.compensate_path,
        payload={
            "step": node.name,
            "output": output,
            "item": unit.item,
            "item_key": unit.item_key,
            "generation": unit.generation,
            "iteration": unit.iteration,
        },
        sequence=sequence,
        max_attempts=default_retry().max_attempts,
        **advancer.workflow.unit_columns(node.name, run.priority, compensation=True),
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
        # A compensation has no rounds: its attempt within its round is its attempt.
        advancer.events.add(
            advancer.run.pk, "compensation.failed", step_id=unit.step_id, **unit.failure()
        )

    # A compensation reclaimed after its run stopped unwinding has failed.
    stopped = failed
