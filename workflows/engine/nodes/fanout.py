"""Fan-out: items computed once, released ``max_parallel`` at a time, counted exactly.

The step's counters change in the same transaction as each item (one
``UPDATE … RETURNING``); releasing the next item reads one pending row. Nothing loads
all items, and the cost of advancing one item does not grow with their number.

A batched fan-out (``batch_size > 1``) records a worker's whole batch in one transition:
the items that ended are counted with one counter update, the step moves on once, and
the items that batch released (one per item that ended) are taken with one set-based
compare-and-set, as the worker's next batch when it chains and ``ready`` otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from workflows.definitions import FanOut
from workflows.engine.advance import Advancer, enters
from workflows.engine.claims import claim_batch_in_scope, claim_in_scope
from workflows.engine.lease import Lease
from workflows.engine.nodes.compensation import CompletedUnit, record_compensation
from workflows.engine.sql.counters import FanOutCounts, bump_item_counter, item_counts, item_outputs
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import ItemRow, StepRow, next_pending_items, step_row
from workflows.engine.sql.updates import cas_update_many, move_row, take_items
from workflows.engine.start import start_child
from workflows.engine.work_kinds import ITEM, FailedUnit, settles
from workflows.errors import ChildRunFailed
from workflows.models import FanOutItem, Run
from workflows.status import RUN_ACTIVE, RunStatus, StepStatus
from workflows.validation import max_length

_BATCH = 1000
# Items not yet handed to a worker.
_UNSTARTED = (StepStatus.PENDING, StepStatus.READY, StepStatus.RETRY_SCHEDULED)


class DuplicateItemKey(ValueError):
    """Two fan-out items have the same key."""


@enters(FanOut)
def enter_fanout(advancer: Advancer, row: StepRow, node: FanOut) -> str:
    """Compute the items once, store them, release the first ``max_parallel``."""
    try:
        values = list(node.items(advancer.context_for(row)))
        keys = [str(node.key(value)) if node.key else str(i) for i, value in enumerate(values)]
        _check(values, keys)
    except Exception as exc:
        return advancer.fail_entering(row, exc, "items_error")
    if not values:
        return advancer.complete(row, [], items=0)
    max_attempts = node.effective_retry.max_attempts
    columns = advancer.workflow.unit_columns(row.name, advancer.run.priority)
    for start in range(0, len(values), _BATCH):
        FanOutItem.objects.bulk_create(
            FanOutItem(
                step_id=row.pk,
                index=i,
                key=keys[i],
                item=values[i],
                max_attempts=max_attempts,
                **columns,
            )
            for i in range(start, min(start + _BATCH, len(values)))
        )
    advancer.move(row, StepStatus.RUNNING, items_total=len(values), started_at=db_now())
    advancer.events.add(advancer.run.pk, "fanout.started", step_id=row.pk, items=len(values))
    _release(advancer, node, row.pk, row.name, (row.generation, row.iteration), node.max_parallel)
    return StepStatus.RUNNING


_KEY_LENGTH = max_length(FanOutItem, "key")


def _check(values: list[Any], keys: list[str]) -> None:
    seen: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key in seen:
            raise DuplicateItemKey(
                f"items {seen[key]} and {index} have the same key {key!r}; keys must be unique"
            )
        if len(key) > _KEY_LENGTH or "\x00" in key:
            raise ValueError(
                f"item {index} has key {key[:40]!r}…: keys must be at most {_KEY_LENGTH} "
                "characters, without NUL"
            )
        seen[key] = index
    json.dumps(values, allow_nan=False)  # items are stored as JSON: fail early, clearly


# A fan-out step's (generation, iteration): part of its claimed items' idempotency keys.
Round = tuple[int, int]


def _release(
    advancer: Advancer, node: FanOut, step_id: int, step_name: str, step_round: Round, count: int
) -> None:
    """Put the next ``count`` pending items in hand, in item order."""
    if count <= 0:
        return
    if node.batch_size == 1:
        for item in next_pending_items(step_id, step_name, count):
            _release_item(advancer, node, step_id, item, step_round)
        return
    claimed = claim_batch_in_scope(
        advancer.scope,
        ITEM,
        step_id=step_id,
        step_name=step_name,
        generation=step_round[0],
        iteration=step_round[1],
        limit=min(count, node.batch_size),
    )
    ready = (
        take_items(
            step_id,
            step_name,
            from_status=StepStatus.PENDING,
            limit=count - claimed,
            status=StepStatus.READY,
            updated_at=db_now(),
        )
        if count > claimed
        else []
    )
    if claimed or ready:
        advancer.mark_in_hand()
    for item in ready:
        advancer.events.add(advancer.run.pk, "item.ready", step_id=step_id, item=item.key)
        advancer.dispatch(ITEM, item.pk, step_name)


def _release_item(
    advancer: Advancer, node: FanOut, step_id: int, item: ItemRow, step_round: Round
) -> None:
    """Put one pending item in hand: claimed for the caller, ready for a worker, or a child.

    ``step_round``: the fan-out step's generation (bumped by each rerun) and iteration
    (moved on by a loop), part of a claimed item's idempotency key.
    """
    advancer.mark_in_hand()
    if node.workflow is not None:
        _move_item(item, StepStatus.WAITING, started_at=db_now())
        child = start_child(
            advancer, node.workflow, node.child_input(item.item), step_id=step_id, item_id=item.pk
        )
        if child.status not in (RunStatus.RUNNING, RunStatus.WAITING):
            settle_child_item(advancer, child, item.pk)
        return
    scope = advancer.scope
    generation, iteration = step_round
    if claim_in_scope(
        scope,
        ITEM,
        item,
        step_id=step_id,
        generation=generation,
        iteration=iteration,
        item_key=item.key,
        item=item.item,
    ):
        return
    _move_item(item, StepStatus.READY)
    advancer.events.add(advancer.run.pk, "item.ready", step_id=step_id, item=item.key)
    advancer.dispatch(ITEM, item.pk, node.name)


def _move_item(item: ItemRow, status: str, **changes: Any) -> None:
    move_row(FanOutItem, item, status, f"item {item.key!r}", **changes)


def items_ended(
    advancer: Advancer, completed: Sequence[tuple[Lease, Any]], failed: Sequence[FailedUnit]
) -> None:
    """Items of one fan-out step ended in this transition; their rows already say so.

    Writes each completed item's compensation record, counts the items with one counter
    update per outcome, then fails the step once failures exceed tolerance, or releases
    one pending item per item that ended (completes the step when none is left).
    """
    first = completed[0][0] if completed else failed[0]
    step_id, step_name = first.step_id, first.step_name
    step_round = (first.generation, first.iteration)
    node = advancer.workflow.nodes[step_name]
    assert isinstance(node, FanOut)
    run = advancer.run
    for lease, output in completed:
        if node.compensate is not None:  # else there is nothing to record
            record_compensation(advancer, node, output, CompletedUnit.of(lease))
        advancer.events.add(
            run.pk, "item.completed", step_id=step_id, item=lease.item_key, attempt=lease.attempt
        )
    for unit in failed:
        advancer.events.add(
            run.pk,
            "item.failed",
            step_id=step_id,
            item=unit.item_key,
            error=unit.error.get("message"),
            attempt=unit.error.get("attempt"),
            failure_class=unit.error.get("failure_class", ""),
        )
    if completed:
        counts = bump_item_counter(step_id, "items_completed", len(completed))
    if failed:
        counts = bump_item_counter(step_id, "items_failed", len(failed))
    if counts.status != StepStatus.RUNNING or run.status not in RUN_ACTIVE:
        return
    if failed and counts.failed > node.allowed_failures(counts.total):
        last = failed[-1]
        _fail_fanout(advancer, step_id, step_name, counts, last.item_key, last.error)
        return
    _move_on(advancer, node, step_id, step_name, counts, step_round, len(completed) + len(failed))


@settles(ITEM)
class ItemSettlement:
    """An item's end is counted on its fan-out step, which then moves on or fails.

    One item (unbatched) or a whole batch: the same code counts them and moves on.
    """

    def completed(self, advancer: Advancer, lease: Lease, output: Any) -> None:
        items_ended(advancer, [(lease, output)], [])

    def failed(self, advancer: Advancer, unit: FailedUnit) -> None:
        items_ended(advancer, [], [unit])

    # A batch of items of one step ended together: counted once, the step moved on once.
    ended = staticmethod(items_ended)

    def stopped(self, advancer: Advancer, unit: FailedUnit) -> None:
        bump_item_counter(unit.step_id, "items_skipped")


def _fail_fanout(
    advancer: Advancer,
    step_id: int,
    step_name: str,
    counts: FanOutCounts,
    key: str,
    error: dict[str, Any],
) -> None:
    step_error = {
        "code": "too_many_item_failures",
        "message": f"{counts.failed} of {counts.total} items failed (last: {key!r}: "
        f"{error.get('message', '')})",
        "failed": counts.failed,
        "total": counts.total,
    }
    skipped = cas_update_many(
        FanOutItem,
        where={"step_id": step_id, "status": _UNSTARTED},
        status=StepStatus.SKIPPED,
        updated_at=db_now(),
    )
    if skipped:
        counts = bump_item_counter(step_id, "items_skipped", len(skipped))
    row = StepRow(step_id, step_name, counts.status, counts.version, 0, 0)
    advancer.move(row, StepStatus.FAILED, error=step_error, finished_at=db_now())
    advancer.events.add(advancer.run.pk, "step.failed", step_id=step_id, code=step_error["code"])
    advancer.fail(step_name, step_error)


def _move_on(
    advancer: Advancer,
    node: FanOut,
    step_id: int,
    step_name: str,
    counts: FanOutCounts,
    step_round: Round,
    released: int = 1,
) -> None:
    """Release the next ``released`` items, or complete the step when every item is final."""
    if counts.status != StepStatus.RUNNING or advancer.run.status not in RUN_ACTIVE:
        return
    if counts.finished >= counts.total:
        row = StepRow(step_id, step_name, counts.status, counts.version, 0, 0)
        advancer.move(row, StepStatus.COMPLETED, output=item_outputs(step_id), finished_at=db_now())
        advancer.events.add(
            advancer.run.pk,
            "step.completed",
            step_id=step_id,
            completed=counts.completed,
            failed=counts.failed,
        )
        advancer.settled(step_name)
    else:
        _release(advancer, node, step_id, step_name, step_round, released)


def resume_fanout(advancer: Advancer, step_id: int, step_name: str) -> None:
    """Restart a revived fan-out step: items skipped when the run stopped run again."""
    node = advancer.workflow.nodes[step_name]
    assert isinstance(node, FanOut)
    cas_update_many(
        FanOutItem,
        where={"step_id": step_id, "status": StepStatus.SKIPPED},
        status=StepStatus.PENDING,
        updated_at=db_now(),
    )
    row = step_row(step_id)
    advancer.move(row, StepStatus.RUNNING, items_skipped=0)
    _refill(advancer, node, row, item_counts(step_id))


def continue_fanout(advancer: Advancer, row: StepRow) -> None:
    """Move a running fan-out on after a pause: the items that ended meanwhile count, and
    the step releases its next items, completes, or fails past its tolerance."""
    node = advancer.workflow.nodes[row.name]
    assert isinstance(node, FanOut)
    counts = item_counts(row.pk)
    if counts.failed > node.allowed_failures(counts.total):
        last = (
            FanOutItem.objects.filter(step_id=row.pk, status=StepStatus.FAILED)
            .order_by("-finished_at")
            .values("key", "error")
            .first()
        ) or {"key": "", "error": {}}
        _fail_fanout(advancer, row.pk, row.name, counts, last["key"], last["error"] or {})
        return
    _refill(advancer, node, row, counts)


def _refill(advancer: Advancer, node: FanOut, row: StepRow, counts: FanOutCounts) -> None:
    """Release items up to ``max_parallel`` in hand, or complete the step when all ended."""
    in_hand = FanOutItem.objects.filter(
        step_id=row.pk, status__in=(StepStatus.READY, StepStatus.RUNNING, StepStatus.WAITING)
    ).count()
    if counts.finished >= counts.total:
        _move_on(advancer, node, row.pk, row.name, counts, (row.generation, row.iteration))
        return
    free = max(node.max_parallel - in_hand, 0)
    _release(advancer, node, row.pk, row.name, (row.generation, row.iteration), free)


def settle_child_item(advancer: Advancer, child: Run, item_id: int) -> None:
    """A child run of fan-out item ``item_id`` ended: complete or fail the item accordingly."""
    item = FanOutItem.objects.select_related("step").get(pk=item_id)
    if item.status != StepStatus.WAITING:
        return
    row = ItemRow(
        item.pk,
        item.step.name,
        item.status,
        item.version,
        item.attempt,
        item.max_attempts,
        key=item.key,
        item=item.item,
    )
    node = advancer.workflow.nodes[item.step.name]
    assert isinstance(node, FanOut)
    if child.status == RunStatus.COMPLETED:
        _move_item(row, StepStatus.COMPLETED, output=child.output, finished_at=db_now())
        counts = bump_item_counter(item.step_id, "items_completed")
        advancer.events.add(
            advancer.run.pk,
            "item.completed",
            step_id=item.step_id,
            item=item.key,
            child=str(child.pk),
        )
        step_round = (item.step.generation, item.step.iteration)
        _move_on(advancer, node, item.step_id, item.step.name, counts, step_round)
    else:
        failure = ChildRunFailed.of(child).as_dict()
        _move_item(row, StepStatus.FAILED, error=failure, finished_at=db_now())
        unit = FailedUnit(
            ITEM,
            item.pk,
            item.step_id,
            item.step.name,
            item.key,
            failure,
            item.step.generation,
            item.step.iteration,
        )
        items_ended(advancer, [], [unit])
