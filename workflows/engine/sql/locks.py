"""Row locks: the lock clause of a transition's reads, and locking the run."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal
from uuid import UUID

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DEFERRED

from workflows.engine.sql.adapters import from_db_json, stored_run_id
from workflows.engine.sql.clock import from_db_datetime
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import fetch_one
from workflows.engine.sql.identifiers import column, table
from workflows.engine.sql.runtime_budgets import runtime_budgets
from workflows.errors import RunBusy
from workflows.models import Run

# The statement aliases a lock may be restricted to (``FOR … OF u``): the unit of a
# claim read, a concurrency slot.
LockedAlias = Literal["", "u", "s"]


def row_lock(
    connection: BaseDatabaseWrapper, *, skip_locked: bool = False, of: LockedAlias = ""
) -> str:
    """The row lock of a transition: ``FOR NO KEY UPDATE`` on PostgreSQL, nothing on SQLite.

    Not ``FOR UPDATE``: that mode also blocks the ``FOR KEY SHARE`` lock that every
    foreign-key check takes on the referenced row, so a worker inserting a step's event
    would wait for whoever holds the run, and a transition waiting for that worker's
    step row would deadlock with it. ``NO KEY UPDATE`` still serialises transitions of
    one run with each other; rows are never re-keyed. ``of``: lock only the rows of
    that alias of the statement.
    """
    if not connection.features.has_select_for_update:
        return ""  # SQLite: BEGIN IMMEDIATE already serialises writers
    if of not in ("", "u", "s"):
        raise ValueError(f"no statement alias {of!r} to lock")
    clause = " FOR NO KEY UPDATE"
    if of:
        clause += f" OF {of}"
    if skip_locked:
        clause += " SKIP LOCKED"
    return clause


# The run columns a transition reads (the key first), in the model's field order, the
# order Model.from_db wants.
_LOCKED_RUN_COLUMNS = tuple(
    field.attname
    for field in Run._meta.concrete_fields
    if field.attname
    in {
        "id",
        "status",
        "version",
        "input",
        "workflow_name",
        "workflow_version",
        "parent_run_id",
        "parent_step_id",
        "flow_id",
        "parent_item_id",
        "skip_compensation",
        "error",
        "priority",
        "business_key",
        "deadline",
        "traceparent",
    }
)
assert _LOCKED_RUN_COLUMNS[0] == "id"
# Every column of the run, and where each one read sits among them: a locked run is
# built from a row as long as the model's (the rest deferred), which ``Model.from_db``
# takes as it is, instead of matching each of its columns against the names read.
_RUN_COLUMNS = tuple(field.attname for field in Run._meta.concrete_fields)
_POSITIONS = tuple(_RUN_COLUMNS.index(name) for name in _LOCKED_RUN_COLUMNS)
_INPUT, _PARENT_RUN, _SKIP_COMPENSATION, _ERROR, _DEADLINE = (
    _RUN_COLUMNS.index(name)
    for name in ("input", "parent_run_id", "skip_compensation", "error", "deadline")
)


def lock_run(run_id: UUID, *, wait: bool = True) -> Run:
    """Read the run row, locked until commit where the database can lock rows.

    On PostgreSQL this serialises transitions of one run, which is what makes a join
    fire exactly once: the second of two finishing branches waits here, then reads the
    first branch's committed status. On SQLite ``BEGIN IMMEDIATE`` already serialises
    every writer. Raises ``Run.DoesNotExist`` for an unknown id.

    Scanners pass ``wait=False``: on PostgreSQL the lock is then taken with ``SKIP
    LOCKED`` and :class:`RunBusy` is raised when another transaction holds the run, so
    one stalled worker (a paused VM holding a run's lock) never stalls the sweeps of
    every other run.
    """
    connection = engine_connection()
    sql = locked_run_select(connection, skip_locked=not wait)
    row = fetch_one(connection, sql, [stored_run_id(run_id, connection)])
    if row is None:
        if not wait and Run.objects.filter(pk=run_id).exists():
            raise RunBusy(f"run {run_id} is held by another transition; skipped for now")
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return locked_run(run_id, row, connection)


def locked_run_select(connection: BaseDatabaseWrapper, *, skip_locked: bool = False) -> str:
    """``SELECT <the run columns a transition reads> FROM <run> WHERE id = %s <lock>``:
    the read of :func:`lock_run`, its key the one parameter; its row goes to
    :func:`locked_run`. Read on every transition: the text is built once per lock."""
    return _locked_run_text(row_lock(connection, skip_locked=skip_locked))


@functools.cache
def _locked_run_text(lock: str) -> str:
    columns = ", ".join(column(Run, name) for name in _LOCKED_RUN_COLUMNS[1:])
    return (
        f"SELECT {columns}, {runtime_budgets(table(Run))} AS runtime_budgets FROM {table(Run)} "
        f"WHERE {column(Run, 'id')} = %s{lock}"
    )


def locked_run(run_id: UUID, row: Sequence[Any], connection: BaseDatabaseWrapper) -> Run:
    """The run ``run_id`` from a row of :func:`locked_run_select` (the first columns of
    ``row``; any further ones are the caller's)."""
    values: list[Any] = [DEFERRED] * len(_RUN_COLUMNS)
    values[_POSITIONS[0]] = run_id
    for position, value in zip(_POSITIONS[1:], row[: len(_POSITIONS) - 1], strict=True):
        values[position] = value
    has_runtime_budgets = bool(row[len(_POSITIONS) - 1])
    values[_INPUT] = from_db_json(Run, "input", values[_INPUT], connection)
    values[_ERROR] = from_db_json(Run, "error", values[_ERROR], connection)
    values[_SKIP_COMPENSATION] = bool(values[_SKIP_COMPENSATION])
    if values[_DEADLINE] is not None:
        values[_DEADLINE] = from_db_datetime(values[_DEADLINE])
    if values[_PARENT_RUN] is not None:
        values[_PARENT_RUN] = Run._meta.pk.to_python(values[_PARENT_RUN])
    # As the ORM builds a model it read: the columns not read are deferred, so reading
    # one of them later loads it instead of answering a default.
    run = Run.from_db(connection.alias, _RUN_COLUMNS, values)
    # Read with the lock for the claims the transition may chain into (admission).
    run.has_runtime_budgets = has_runtime_budgets
    return run
