"""Hand-written SQL for the statements every step transition runs.

Why not the ORM here: on the reference machine, building one ``filter(...).update(...)``
with a few lookups and expressions costs the ORM 0.3-0.5 ms of CPU, several times what
SQLite needs to execute it, and a chained step runs five such statements (see
docs/benchmarks.md). These helpers build the same compare-and-set ``UPDATE`` and the
few hot ``SELECT``/``INSERT`` statements from the models' own metadata, adapt values
through the models' own fields, and run on SQLite and PostgreSQL (the two databases
the suite runs on). Everything that is not on the per-step path keeps using the ORM.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from workflows.models import Event, Run, Step


@dataclass(frozen=True)
class SqlExpr:
    """A fragment of SQL with its parameters, used as the new value of a column."""

    sql: str
    params: tuple[Any, ...] = ()


def _db() -> BaseDatabaseWrapper:
    """The connection of the workflows tables (looked up once per statement: it is a
    thread-local proxy, and each attribute access through the proxy costs a lookup)."""
    return connections[DEFAULT_DB_ALIAS]


def _postgres() -> bool:
    return _db().vendor == "postgresql"


def db_now() -> SqlExpr:
    """The database clock, as Django's ``Now()`` renders it on each backend."""
    if _postgres():
        return SqlExpr("STATEMENT_TIMESTAMP()")
    return SqlExpr("STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW')")


def db_now_plus(delta: timedelta) -> SqlExpr:
    """The database clock plus ``delta``: leases are compared on one clock for all hosts."""
    seconds = delta.total_seconds()
    if _postgres():
        return SqlExpr("STATEMENT_TIMESTAMP() + make_interval(secs => %s)", (seconds,))
    return SqlExpr("STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW', %s)", (f"{seconds:+f} seconds",))


@functools.cache
def _quote(name: str) -> str:
    return _db().ops.quote_name(name)


def _column(model: type[models.Model], name: str) -> tuple[models.Field, str]:
    field = model._meta.get_field(name)
    return field, _quote(field.column)


def cas_update(
    model: type[models.Model],
    pk: Any,
    *,
    version: int,
    where: dict[str, Any] | None = None,
    **changes: Any,
) -> bool:
    """``UPDATE … SET version = version + 1, … WHERE pk = ? AND version = ? [AND col = ?]``.

    Returns whether exactly the expected row changed; ``False`` means another writer
    moved first and nothing was written.
    """
    connection = _db()
    assignments = [f"{_quote('version')} = {_quote('version')} + 1"]
    params: list[Any] = []
    for name, value in changes.items():
        field, column = _column(model, name)
        if isinstance(value, SqlExpr):
            assignments.append(f"{column} = {value.sql}")
            params.extend(value.params)
        else:
            assignments.append(f"{column} = %s")
            params.append(field.get_db_prep_save(value, connection))
    pk_field = model._meta.pk
    conditions = [f"{_quote(pk_field.column)} = %s", f"{_quote('version')} = %s"]
    params += [pk_field.get_db_prep_value(pk, connection), version]
    for name, value in (where or {}).items():
        field, column = _column(model, name)
        conditions.append(f"{column} = %s")
        params.append(field.get_db_prep_value(value, connection))
    sql = (
        f"UPDATE {_quote(model._meta.db_table)} SET {', '.join(assignments)} "
        f"WHERE {' AND '.join(conditions)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


def _json(model: type[models.Model], name: str, value: Any) -> Any:
    return model._meta.get_field(name).from_db_value(value, None, _db())


def _for_update(*, skip_locked: bool = False, of: str = "") -> str:
    if not _db().features.has_select_for_update:
        return ""  # SQLite: BEGIN IMMEDIATE already serialises writers
    clause = " FOR UPDATE"
    if of:
        clause += f" OF {of}"
    if skip_locked:
        clause += " SKIP LOCKED"
    return clause


def lock_run(run_id: UUID) -> Run:
    """Read the run row, locked until commit where the database can lock rows.

    On PostgreSQL this serialises transitions of one run, which is what makes a join
    fire exactly once: the second of two finishing branches waits here, then reads the
    first branch's committed status. On SQLite ``BEGIN IMMEDIATE`` already serialises
    every writer. Raises ``Run.DoesNotExist`` for an unknown id.
    """
    table = _quote(Run._meta.db_table)
    sql = (
        f"SELECT status, version, input, workflow_name, workflow_version FROM {table} "
        f"WHERE {_quote('id')} = %s{_for_update()}"
    )
    connection = _db()
    with connection.cursor() as cursor:
        cursor.execute(sql, [Run._meta.pk.get_db_prep_value(run_id, connection)])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    status, version, input, workflow_name, workflow_version = row
    return Run(
        id=run_id,
        status=status,
        version=version,
        input=_json(Run, "input", input),
        workflow_name=workflow_name,
        workflow_version=workflow_version,
    )


@dataclass
class StepRow:
    """The columns of a step that graph evaluation reads and compare-and-sets."""

    pk: int
    name: str
    status: str
    version: int
    attempt: int


_STEP_ROW_COLUMNS = "id, name, status, version, attempt"


def step_rows(run_id: UUID, names: Iterable[str]) -> list[StepRow]:
    """Return the named steps of a run."""
    names = list(names)
    placeholders = ", ".join(["%s"] * len(names))
    sql = (
        f"SELECT {_STEP_ROW_COLUMNS} FROM {_quote(Step._meta.db_table)} "
        f"WHERE {_quote('run_id')} = %s AND {_quote('name')} IN ({placeholders})"
    )
    connection = _db()
    with connection.cursor() as cursor:
        cursor.execute(sql, [Run._meta.pk.get_db_prep_value(run_id, connection), *names])
        return [StepRow(*row) for row in cursor.fetchall()]


@dataclass
class ClaimCandidate:
    """A step about to be claimed, with what the worker needs of its run."""

    step: StepRow
    run_id: UUID
    run_input: dict[str, Any]
    workflow_name: str
    workflow_version: int


def claim_candidate(step_id: int) -> ClaimCandidate | None:
    """Read a step and its run for claiming; ``None`` if missing or locked by a claimer.

    On PostgreSQL the step row is locked with ``SKIP LOCKED``: a worker that receives a
    duplicate nudge for a step another worker is claiming right now moves on instead of
    queueing behind it.
    """
    step_table, run_table = _quote(Step._meta.db_table), _quote(Run._meta.db_table)
    columns = ", ".join(f"s.{c.strip()}" for c in _STEP_ROW_COLUMNS.split(","))
    sql = (
        f"SELECT {columns}, r.id, r.input, r.workflow_name, r.workflow_version "
        f"FROM {step_table} s JOIN {run_table} r ON r.id = s.run_id "
        f"WHERE s.id = %s{_for_update(skip_locked=True, of='s')}"
    )
    with _db().cursor() as cursor:
        cursor.execute(sql, [step_id])
        row = cursor.fetchone()
    if row is None:
        return None
    run_id = Run._meta.pk.to_python(row[5])
    return ClaimCandidate(
        step=StepRow(*row[:5]),
        run_id=run_id,
        run_input=_json(Run, "input", row[6]),
        workflow_name=row[7],
        workflow_version=row[8],
    )


def insert_events(events: Sequence[tuple[UUID, int | None, str, dict[str, Any]]]) -> None:
    """Insert (run id, step id, type, payload) event rows with one multi-row ``INSERT``."""
    connection = _db()
    now = Event._meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)
    run_id, step_id, type_, payload = (
        Event._meta.get_field(name) for name in ("run", "step", "type", "payload")
    )
    columns = ", ".join(_quote(f.column) for f in (run_id, step_id, type_, payload))
    values, params = [], []
    for run, step, kind, data in events:
        values.append("(%s, %s, %s, %s, %s, %s)")
        params += [
            run_id.get_db_prep_save(run, connection),
            step,
            kind,
            payload.get_db_prep_save(data, connection),
            now,
            False,
        ]
    sql = (
        f"INSERT INTO {_quote(Event._meta.db_table)} "
        f"({columns}, {_quote('created_at')}, {_quote('published')}) VALUES {', '.join(values)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
