"""One batch of retention: whole runs, and everything of theirs, in one transaction.

A batch reads the next top-level runs ended before the cutoff in (``finished_at``,
``id``) order after a position (a keyset: the read starts where the last batch stopped,
through the index on ``finished_at``, never counting or skipping what came before), and
deletes them with their child runs and every row that references any of them
(:mod:`workflows.engine.sql.retention`). A run and all its rows go in the same
transaction, so a purge killed at any moment leaves whole runs or none; the next purge
reads from the oldest run left and goes on.

Not a transition on a run: no run's state changes and no event is written (the history
goes with the run), so no run is locked and no scope opened. What a batch expects it
states in its deletes: a run retried or reopened after the read is not deleted, and
nothing of it is. A top-level run whose child run is still going is kept (the
orphaned-children scanner ends the child; a later purge takes both). A member of a flow
that has not ended is kept: its flow's joins still read it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Q

from workflows.engine.sql.adapters import stored_run_id
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.retention import (
    delete_children,
    delete_ended_flows,
    delete_owned,
    delete_roots,
    run_trees,
)
from workflows.engine.transaction import transition
from workflows.models import Run
from workflows.status import FLOW_FINAL, RUN_FINAL

# Where a batch starts: after this (finished_at, id), or at the oldest run when None.
Position = tuple[datetime, UUID]


class TreeMoved(Exception):
    """A child run of a run being deleted was reopened between the batch's read and its
    delete (PostgreSQL, another transaction): the batch rolls back, whole."""


@dataclass
class Batch:
    """What one batch read and deleted."""

    read: int = 0
    runs: int = 0
    child_runs: int = 0
    flows: int = 0
    # Read but kept: reopened since the read, a child run still going.
    kept: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    # The position after this batch (its last run read); None when it read nothing.
    position: Position | None = None

    @property
    def rows_deleted(self) -> int:
        """Every row deleted: the runs (child runs too), their rows and flows."""
        return self.runs + self.child_runs + self.flows + sum(self.rows.values())


def ended_runs(before: datetime) -> Any:
    """The top-level runs a purge with cutoff ``before`` deletes, as a queryset: ended
    before it, and not members of a flow still going."""
    return Run.objects.filter(
        Q(flow__isnull=True) | Q(flow__status__in=sorted(FLOW_FINAL)),
        parent_run__isnull=True,
        status__in=sorted(RUN_FINAL),
        finished_at__lt=before,
    )


def _after(position: Position | None) -> Q:
    if position is None:
        return Q()
    finished_at, run_id = position
    # The first condition alone is the index's range; the rest breaks ties on the time.
    return Q(finished_at__gte=finished_at) & (Q(finished_at__gt=finished_at) | Q(id__gt=run_id))


@transition
def purge_batch(*, before: datetime, after: Position | None, size: int) -> Batch:
    """Delete the next ``size`` top-level runs ended before ``before`` after ``after``,
    with everything of theirs, in one transaction; return what went."""
    candidates = list(
        ended_runs(before)
        .filter(_after(after))
        .order_by("finished_at", "id")
        .values_list("id", "finished_at")[:size]
    )
    batch = Batch(read=len(candidates))
    if not candidates:
        return batch
    last_id, last_finished = candidates[-1]
    batch.position = (last_finished, last_id)
    connection = engine_connection()
    roots = [stored_run_id(run_id, connection) for run_id, _ in candidates]
    below: dict[Any, list[Any]] = defaultdict(list)
    going = set()
    for run_id, root, status in run_trees(roots):
        below[root].append(run_id)
        if status not in RUN_FINAL:
            going.add(root)
    deleted = delete_roots([root for root in roots if root not in going], before)
    children = [child for root, _ in deleted for child in below[root]]
    if delete_children(children) != len(children):
        raise TreeMoved(f"a child run of {len(deleted)} run(s) being deleted was reopened")
    batch.runs, batch.child_runs = len(deleted), len(children)
    batch.kept = batch.read - batch.runs
    batch.rows = delete_owned([root for root, _ in deleted] + children)
    batch.flows = delete_ended_flows({flow for _, flow in deleted})
    return batch
