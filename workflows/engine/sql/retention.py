"""The set-based deletes of retention: whole runs, with everything that references them.

One batch (:mod:`workflows.engine.retention.batches`) runs these statements in one
transaction, in this order:

1. :func:`run_trees`: the child runs (and theirs, down the tree) of the candidate
   top-level runs, with their statuses: one recursive statement through the partial
   index of child runs.
2. :func:`delete_roots`: the candidates themselves, in one ``DELETE ... RETURNING``
   whose WHERE restates what retention expects of each (top-level, ended, ended before
   the cutoff, not the member of a flow still going). A run retried or reopened since it
   was read is not deleted, and nothing of it is touched: everything below is keyed by
   the ids this statement returned.
3. :func:`delete_children`: their child runs, restating that each is still ended.
4. :func:`delete_owned`: every row that references those runs or their steps, one
   ``DELETE`` per table through the index that leads with the run or the step, and the
   ``SET NULL`` of the rows that only point at them (a slot's holder, a schedule's last
   run, a signal's consuming step), bumping their ``version``.
5. :func:`delete_ended_flows`: the flows of the deleted members once their last member
   is gone, with the flow's own events.

Every relation that points at a run, a step, an item, a compensation record or a flow
member is in :data:`OWNED` or :data:`NULLED`; ``tests/engine/test_retention.py`` reads
the models' relations and fails on one that is not, so a new table is never left
holding rows of deleted runs (nor refused by its foreign key at commit).

The database has no ``ON DELETE CASCADE`` (Django emulates it, and its collector reads
every row it deletes): these statements are the cascade, and the foreign keys, deferred
on both databases, are checked at commit against a transaction that deleted it all.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import execute, fetch_all
from workflows.engine.sql.identifiers import column, table
from workflows.models import (
    CompensationRecord,
    ConcurrencySlot,
    Event,
    FanOutItem,
    Flow,
    FlowEdge,
    FlowMember,
    Frame,
    Run,
    RunTag,
    Schedule,
    Signal,
    Step,
    StepIteration,
    StepRound,
    Timer,
    UsageReport,
)
from workflows.status import FLOW_FINAL, RUN_FINAL

# A stored run id as the database returns it (a UUID on PostgreSQL, hex text on SQLite).
StoredId = Any

_FINAL_RUNS = tuple(sorted(RUN_FINAL))
_FINAL_FLOWS = tuple(sorted(FLOW_FINAL))


@dataclass(frozen=True)
class Owned:
    """Rows of ``model`` deleted with a run: those whose ``column`` is one of the deleted
    runs' ids (``by="run"``), or one of their steps' (``by="step"``), or the flow
    members' (``by="member"``)."""

    model: type[models.Model]
    field: str
    by: str


# Deleted with the run, in this order (rows reached through a step before the steps).
OWNED: tuple[Owned, ...] = (
    Owned(Event, "run", "run"),
    Owned(Frame, "step", "step"),
    Owned(FanOutItem, "step", "step"),
    Owned(StepIteration, "step", "step"),
    Owned(StepRound, "step", "step"),
    Owned(Timer, "run", "run"),
    Owned(CompensationRecord, "run", "run"),
    Owned(Signal, "run", "run"),
    Owned(UsageReport, "run", "run"),
    # A report names its step and run both; by the step too, so that one written with
    # its step alone never holds a run's deletion back at commit.
    Owned(UsageReport, "step", "step"),
    Owned(FlowEdge, "upstream", "member"),
    Owned(FlowEdge, "downstream", "member"),
    Owned(FlowMember, "run", "run"),
    Owned(RunTag, "run", "run"),
    Owned(Step, "run", "run"),
)

# Rows that only point at a deleted run or step: kept, the pointer emptied (SET_NULL).
NULLED: tuple[Owned, ...] = (
    Owned(ConcurrencySlot, "holder_run", "run"),
    Owned(Schedule, "last_run", "run"),
    Owned(Signal, "consumed_by", "step"),
)

# Relations covered otherwise: by the same run's rows deleted through another column
# (a step's events carry its run, a step's timers and compensations too, an item's
# timers, compensations and child runs belong to its run), the run tree itself (child
# runs), or the flow (deleted with its last member, see delete_ended_flows).
COVERED_ELSEWHERE: frozenset[tuple[type[models.Model], str]] = frozenset(
    {
        (Run, "parent_run"),
        (Run, "parent_step"),
        (Run, "parent_item"),
        (Event, "step"),
        (Timer, "step"),
        (Timer, "item"),
        (Timer, "compensation"),
        (CompensationRecord, "step"),
        (CompensationRecord, "item"),
        (StepIteration, "run"),
        (StepRound, "run"),
        (Run, "flow"),
        (Event, "flow"),
        (FlowMember, "flow"),
        (FlowEdge, "flow"),
    }
)


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def _ended_before(cutoff: datetime) -> Any:
    """The cutoff as the database stores ``finished_at``."""
    connection = engine_connection()
    return Run._meta.get_field("finished_at").get_db_prep_value(cutoff, connection)


def run_trees(root_ids: Sequence[StoredId]) -> list[tuple[StoredId, StoredId, str]]:
    """``(run id, top-level run id, status)`` of every run below ``root_ids``."""
    if not root_ids:
        return []
    runs, parent, status = table(Run), column(Run, "parent_run"), column(Run, "status")
    sql = (
        f"WITH RECURSIVE tree(id, root) AS ("
        f"SELECT r.id, r.{parent} FROM {runs} r WHERE r.{parent} IN ({_marks(len(root_ids))}) "
        f"UNION ALL SELECT r.id, tree.root FROM {runs} r JOIN tree ON r.{parent} = tree.id"
        f") SELECT tree.id, tree.root, r.{status} FROM tree JOIN {runs} r ON r.id = tree.id"
    )
    rows = fetch_all(engine_connection(), sql, list(root_ids))
    return [(row[0], row[1], row[2]) for row in rows]


def delete_roots(
    root_ids: Sequence[StoredId], cutoff: datetime
) -> list[tuple[StoredId, StoredId | None]]:
    """Delete those of ``root_ids`` that are still top-level runs ended before ``cutoff``
    and not members of a flow still going; return ``(id, flow id)`` of each deleted."""
    if not root_ids:
        return []
    runs, flows = table(Run), table(Flow)
    flow, status = column(Run, "flow"), column(Run, "status")
    sql = (
        f"DELETE FROM {runs} WHERE id IN ({_marks(len(root_ids))}) "
        f"AND {column(Run, 'parent_run')} IS NULL "
        f"AND {column(Run, 'finished_at')} < %s "
        f"AND {status} IN ({_marks(len(_FINAL_RUNS))}) "
        f"AND ({flow} IS NULL OR NOT EXISTS (SELECT 1 FROM {flows} f "
        f"WHERE f.id = {runs}.{flow} AND f.{column(Flow, 'status')} "
        f"NOT IN ({_marks(len(_FINAL_FLOWS))}))) "
        f"RETURNING id, {flow}"
    )
    params = [*root_ids, _ended_before(cutoff), *_FINAL_RUNS, *_FINAL_FLOWS]
    return [(row[0], row[1]) for row in fetch_all(engine_connection(), sql, params)]


def delete_children(child_ids: Sequence[StoredId]) -> int:
    """Delete the child runs ``child_ids`` that are still ended; return how many went."""
    if not child_ids:
        return 0
    sql = (
        f"DELETE FROM {table(Run)} WHERE id IN ({_marks(len(child_ids))}) "
        f"AND {column(Run, 'status')} IN ({_marks(len(_FINAL_RUNS))})"
    )
    return execute(engine_connection(), sql, [*child_ids, *_FINAL_RUNS])


def _key_rows(by: str, count: int) -> str:
    """The subquery of the keys a relation ``by`` points at, for ``count`` run ids."""
    if by == "run":
        return _marks(count)
    if by == "step":
        return f"SELECT id FROM {table(Step)} WHERE {column(Step, 'run')} IN ({_marks(count)})"
    return (
        f"SELECT id FROM {table(FlowMember)} WHERE {column(FlowMember, 'run')} IN ({_marks(count)})"
    )


@functools.cache
def _owned_text(owned: Owned, count: int) -> str:
    return (
        f"DELETE FROM {table(owned.model)} "
        f"WHERE {column(owned.model, owned.field)} IN ({_key_rows(owned.by, count)})"
    )


@functools.cache
def _nulled_text(nulled: Owned, count: int) -> str:
    target = column(nulled.model, nulled.field)
    version = column(nulled.model, "version")
    return (
        f"UPDATE {table(nulled.model)} SET {target} = NULL, {version} = {version} + 1 "
        f"WHERE {target} IN ({_key_rows(nulled.by, count)})"
    )


def delete_owned(run_ids: Sequence[StoredId]) -> dict[str, int]:
    """Delete every row owned by the runs ``run_ids`` (already deleted themselves, or
    about to be) and empty the pointers at them; return the rows deleted by table."""
    deleted: dict[str, int] = {}
    if not run_ids:
        return deleted
    connection, params = engine_connection(), list(run_ids)
    for nulled in NULLED:
        execute(connection, _nulled_text(nulled, len(params)), params)
    for owned in OWNED:
        label = owned.model._meta.model_name or owned.model.__name__
        count = execute(connection, _owned_text(owned, len(params)), params)
        deleted[label] = deleted.get(label, 0) + count
    return deleted


def delete_ended_flows(flow_ids: Collection[StoredId]) -> int:
    """Delete the ended flows among ``flow_ids`` that have no member left, with their
    own events (those about the flow as a whole); return how many flows went."""
    ids = [flow_id for flow_id in flow_ids if flow_id is not None]
    if not ids:
        return 0
    flows, members = table(Flow), table(FlowMember)
    gone = (
        f"SELECT id FROM {flows} f WHERE f.id IN ({_marks(len(ids))}) "
        f"AND f.{column(Flow, 'status')} IN ({_marks(len(_FINAL_FLOWS))}) "
        f"AND NOT EXISTS (SELECT 1 FROM {members} m WHERE m.{column(FlowMember, 'flow')} = f.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {table(Run)} r WHERE r.{column(Run, 'flow')} = f.id)"
    )
    connection, params = engine_connection(), [*ids, *_FINAL_FLOWS]
    ended = [row[0] for row in fetch_all(connection, gone, params)]
    if not ended:
        return 0
    execute(
        connection,
        f"DELETE FROM {table(Event)} WHERE {column(Event, 'flow')} IN ({_marks(len(ended))})",
        ended,
    )
    execute(  # none left when the last member went; stated all the same
        connection,
        f"DELETE FROM {table(FlowEdge)} WHERE {column(FlowEdge, 'flow')} IN ({_marks(len(ended))})",
        ended,
    )
    return execute(connection, f"DELETE FROM {flows} WHERE id IN ({_marks(len(ended))})", ended)
