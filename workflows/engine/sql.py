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
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.db import connections, models, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from workflows.engine.dbapi import (
    Adapter,
    adapter,
    execute,
    fetch_all,
    fetch_one,
    field_adapter,
)
from workflows.errors import RunBusy, StaleState
from workflows.models import CompensationRecord, Event, FanOutItem, Run, Step
from workflows.status import RUN_ACTIVE, StepStatus


@dataclass(frozen=True)
class SqlExpr:
    """A fragment of SQL with its parameters, used as the new value of a column."""

    sql: str
    params: tuple[Any, ...] = ()

    def render(self, vendor: str) -> tuple[str, tuple[Any, ...]]:
        return self.sql, self.params


@dataclass(frozen=True)
class DbClock(SqlExpr):
    """The database clock (plus an offset), rendered for the database of the statement.

    Built without knowing the database, so building ``updated_at=db_now()`` costs no
    router lookup; the statement that uses it renders it once for its connection.
    """

    offset: timedelta | None = None

    def render(self, vendor: str) -> tuple[str, tuple[Any, ...]]:
        if self.offset is None:
            if vendor == "postgresql":
                return "STATEMENT_TIMESTAMP()", ()
            return "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW')", ()
        seconds = self.offset.total_seconds()
        if vendor == "postgresql":
            return "STATEMENT_TIMESTAMP() + make_interval(secs => %s)", (seconds,)
        return "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW', %s)", (f"{seconds:+f} seconds",)


def engine_alias() -> str:
    """The database alias of the workflows tables, resolved the Django way.

    The router's ``db_for_write`` for the engine's models: hand-written statements,
    ORM calls and the transaction around them all use it, so a project that routes the
    workflows app to its own database gets every statement there. Resolved once per
    transition (:func:`statements_on`), whose statements must all run in its
    transaction, and for every statement outside one: a router may choose by request
    or tenant.
    """
    current = _TRANSITION_DB.get()
    return current.alias if current is not None else router.db_for_write(Run)


# The connection of the transition running in this thread (context), if any.
_TRANSITION_DB: ContextVar[BaseDatabaseWrapper | None] = ContextVar(
    "workflows_transition_db", default=None
)


@contextmanager
def statements_on(alias: str) -> Iterator[None]:
    """Send the engine's statements to ``alias`` meanwhile: the transaction of a transition."""
    token = _TRANSITION_DB.set(connections[alias])
    try:
        yield
    finally:
        _TRANSITION_DB.reset(token)


def _db() -> BaseDatabaseWrapper:
    """The connection of the workflows tables: the transition's, or the router's choice."""
    current = _TRANSITION_DB.get()
    return current if current is not None else connections[router.db_for_write(Run)]


def db_now() -> SqlExpr:
    """The database clock, as Django's ``Now()`` renders it on each backend."""
    return _NOW


_NOW = DbClock("")


def db_now_plus(delta: timedelta) -> SqlExpr:
    """The database clock plus ``delta``: leases are compared on one clock for all hosts."""
    return DbClock("", offset=delta)


def attempts_plus(count: int) -> SqlExpr:
    """``attempt + count``, computed row by row: a fresh set of attempts after a retry."""
    return SqlExpr(f"{_quote('attempt')} + %s", (count,))


@functools.cache
def _quote(name: str) -> str:
    """Quote an identifier. SQLite and PostgreSQL, the two databases the engine runs on
    (system check ``workflows.E003``), quote alike, so the result depends on the name
    alone and is computed once."""
    return name if name.startswith('"') and name.endswith('"') else f'"{name}"'


@functools.cache
def _column(model: type[models.Model], name: str) -> tuple[models.Field, str]:
    field = model._meta.get_field(name)
    return field, _quote(field.column)


def _update_sql(
    connection: BaseDatabaseWrapper,
    model: type[models.Model],
    where: dict[str, Any],
    changes: dict[str, Any],
    *,
    joined: str = "",
) -> tuple[str, list[Any]]:
    """``UPDATE … SET version = version + 1, <changes> [FROM joined] WHERE <where>``.

    A ``where`` value that is a list, tuple or set becomes ``IN (…)``, ``None`` becomes
    ``IS NULL``, any other value ``= %s``. Every statement built here bumps ``version``:
    a concurrent compare-and-set that read the row before sees it changed. ``joined``
    names a table of the statement's ``WITH`` clause to join (``UPDATE … FROM``); its
    columns must not share names with the model's. The text is built once per shape
    (:func:`_update_text`); only the parameters are built per call.
    """
    vendor, native_uuid = connection.vendor, connection.features.has_native_uuid_field
    params: list[Any] = []
    assigned: list[tuple[str, str | None]] = []
    for name, value in changes.items():
        if isinstance(value, SqlExpr):
            sql, extra = value.render(vendor)
            assigned.append((name, sql))
            params.extend(extra)
        else:
            if isinstance(value, models.Model):
                value = value.pk  # a related object is stored by its key
            assigned.append((name, None))
            params.append(_prep_of(model, name, native_uuid)(value, connection))
    matched: list[tuple[str, int | None]] = []
    for name, value in where.items():
        if value is None:
            matched.append((name, None))
        elif isinstance(value, list | tuple | set | frozenset):
            matched.append((name, len(value)))
            prep = _prep_of(model, name, native_uuid)
            params.extend(prep(one, connection) for one in value)
        else:
            matched.append((name, 0))
            params.append(_prep_of(model, name, native_uuid)(value, connection))
    return _update_text(model, tuple(assigned), tuple(matched), joined), params


@functools.lru_cache(maxsize=512)
def _update_text(
    model: type[models.Model],
    assigned: tuple[tuple[str, str | None], ...],
    matched: tuple[tuple[str, int | None], ...],
    joined: str,
) -> str:
    """The text of an ``UPDATE`` of :func:`_update_sql`'s shape.

    ``assigned``: (field, SQL of its new value, or ``None`` for a parameter);
    ``matched``: (field, ``None`` for ``IS NULL``, 0 for ``= %s``, n for ``IN`` of n).
    """
    assignments = [f"{_quote('version')} = {_quote('version')} + 1"]
    for name, sql in assigned:
        assignments.append(f"{_column(model, name)[1]} = {sql if sql is not None else '%s'}")
    conditions = []
    for name, count in matched:
        column = _column(model, name)[1]
        if count is None:
            conditions.append(f"{column} IS NULL")
        elif count:
            conditions.append(f"{column} IN ({', '.join(['%s'] * count)})")
        else:
            conditions.append(f"{column} = %s")
    return (
        f"UPDATE {_quote(model._meta.db_table)} SET {', '.join(assignments)} "
        f"{f'FROM {joined} ' if joined else ''}WHERE {' AND '.join(conditions)}"
    )


def _run_key(run_id: UUID, connection: BaseDatabaseWrapper) -> Any:
    """A run's id as the database stores it, for the statements that look runs up."""
    return adapter(Run._meta.pk, connection)(run_id, connection)


@functools.cache
def _prep_of(model: type[models.Model], name: str, native_uuid: bool) -> Adapter:
    """How a value of the model's field ``name`` is stored (:func:`dbapi.adapter`)."""
    return field_adapter(_column(model, name)[0], native_uuid)


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
    conditions = {model._meta.pk.name: pk, "version": version, **(where or {})}
    connection = _db()
    sql, params = _update_sql(connection, model, conditions, changes)
    return execute(connection, sql, params) == 1


def move_row(
    model: type[models.Model], row: StepRow, status: str, label: str, **changes: Any
) -> None:
    """Compare-and-set a step or item ``row`` from its status to ``status``.

    Raises :class:`StaleState` naming ``label`` when the row moved meanwhile; on success
    ``row`` carries the new status and version.
    """
    if not cas_update(
        model,
        row.pk,
        version=row.version,
        where={"status": row.status},
        status=status,
        updated_at=db_now(),
        **changes,
    ):
        raise StaleState(f"{label} changed while moving {row.status} → {status}")
    row.status = status
    row.version += 1


def cas_update_many(
    model: type[models.Model],
    *,
    where: dict[str, Any],
    returning: Sequence[str] = ("id",),
    **changes: Any,
) -> list[tuple[Any, ...]]:
    """The set-based compare-and-set: update every row still matching ``where``.

    ``where`` must restate the status each row is expected to have: on PostgreSQL a
    row read a moment ago may have been claimed since, and the database re-checks the
    condition on the row's newest version, so such a row is left alone. Returns the
    ``returning`` columns of the rows actually changed (``UPDATE … RETURNING``), so the
    caller records events for those rows only.
    """
    assert "status" in where, "a set-based update must state the status it expects"
    connection = _db()
    sql, params = _update_sql(connection, model, where, changes)
    columns = ", ".join(_column(model, name)[1] for name in returning)
    return fetch_all(connection, f"{sql} RETURNING {columns}", params)


def _json(model: type[models.Model], name: str, value: Any, connection: Any) -> Any:
    return model._meta.get_field(name).from_db_value(value, None, connection)


def _for_update(connection: BaseDatabaseWrapper, *, skip_locked: bool = False, of: str = "") -> str:
    """The row lock of a transition: ``FOR NO KEY UPDATE`` on PostgreSQL.

    Not ``FOR UPDATE``: that mode also blocks the ``FOR KEY SHARE`` lock that every
    foreign-key check takes on the referenced row, so a worker inserting a step's event
    would wait for whoever holds the run, and a transition waiting for that worker's
    step row would deadlock with it. ``NO KEY UPDATE`` still serialises transitions of
    one run with each other; rows are never re-keyed.
    """
    if not connection.features.has_select_for_update:
        return ""  # SQLite: BEGIN IMMEDIATE already serialises writers
    clause = " FOR NO KEY UPDATE"
    if of:
        clause += f" OF {of}"
    if skip_locked:
        clause += " SKIP LOCKED"
    return clause


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
    connection = _db()
    columns = ", ".join(_quote(name) for name in _LOCKED_RUN_COLUMNS[1:])
    sql = (
        f"SELECT {columns} FROM {_quote(Run._meta.db_table)} "
        f"WHERE {_quote('id')} = %s{_for_update(connection, skip_locked=not wait)}"
    )
    row = fetch_one(connection, sql, [_run_key(run_id, connection)])
    if row is None:
        if not wait and Run.objects.filter(pk=run_id).exists():
            raise RunBusy(f"run {run_id} is held by another transition; skipped for now")
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    values = dict(zip(_LOCKED_RUN_COLUMNS[1:], row, strict=True), id=run_id)
    values["input"] = _json(Run, "input", values["input"], connection)
    values["error"] = _json(Run, "error", values["error"], connection)
    values["skip_compensation"] = bool(values["skip_compensation"])
    if values["parent_run_id"] is not None:
        values["parent_run_id"] = Run._meta.pk.to_python(values["parent_run_id"])
    # As the ORM builds a model it read: the columns not read are deferred, so reading
    # one of them later loads it instead of answering a default.
    return Run.from_db(
        connection.alias, _LOCKED_RUN_COLUMNS, [values[name] for name in _LOCKED_RUN_COLUMNS]
    )


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
        "parent_item_id",
        "skip_compensation",
        "error",
        "priority",
        "business_key",
    }
)
assert _LOCKED_RUN_COLUMNS[0] == "id"


@dataclass
class StepRow:
    """The columns of a step that graph evaluation reads and compare-and-sets."""

    pk: int
    name: str
    status: str
    version: int
    attempt: int
    max_attempts: int
    generation: int = 0


# The columns of a StepRow, in order: for hand-written SELECTs and ORM values_list().
STEP_ROW_FIELDS = ("id", "name", "status", "version", "attempt", "max_attempts", "generation")
_STEP_ROW_COLUMNS = ", ".join(STEP_ROW_FIELDS)


def step_rows(run_id: UUID, names: Iterable[str]) -> list[StepRow]:
    """Return the named steps of a run."""
    names = list(names)
    placeholders = ", ".join(["%s"] * len(names))
    sql = (
        f"SELECT {_STEP_ROW_COLUMNS} FROM {_quote(Step._meta.db_table)} "
        f"WHERE {_quote('run_id')} = %s AND {_quote('name')} IN ({placeholders})"
    )
    connection = _db()
    run_key = _run_key(run_id, connection)
    return [StepRow(*row) for row in fetch_all(connection, sql, [run_key, *names])]


def step_row(step_id: int) -> StepRow:
    """Read one step's row (raises ``Step.DoesNotExist``)."""
    sql = f"SELECT {_STEP_ROW_COLUMNS} FROM {_quote(Step._meta.db_table)} WHERE id = %s"
    row = fetch_one(_db(), sql, [step_id])
    if row is None:
        raise Step.DoesNotExist(f"step {step_id} does not exist")
    return StepRow(*row)


def step_statuses(run_id: UUID) -> set[str]:
    """The statuses the run's steps are in (each once): what settles the run's own."""
    connection = _db()
    sql = (
        f"SELECT DISTINCT {_quote('status')} FROM {_quote(Step._meta.db_table)} "
        f"WHERE {_quote('run_id')} = %s"
    )
    run_key = _run_key(run_id, connection)
    return {status for (status,) in fetch_all(connection, sql, [run_key])}


def completed_outputs(run_id: UUID, names: Sequence[str]) -> dict[str, Any]:
    """The outputs of the run's completed steps among ``names``, by step name."""
    connection = _db()
    sql = (
        f"SELECT {_quote('name')}, {_quote('output')} FROM {_quote(Step._meta.db_table)} "
        f"WHERE {_quote('run_id')} = %s AND {_quote('status')} = %s "
        f"AND {_quote('name')} IN ({', '.join(['%s'] * len(names))})"
    )
    run_key = _run_key(run_id, connection)
    params = [run_key, StepStatus.COMPLETED, *names]
    rows = fetch_all(connection, sql, params) if names else []
    return {name: _json(Step, "output", output, connection) for name, output in rows}


def locked_step(step_id: int) -> tuple[Run, StepRow]:
    """Lock the run of a step, then read the step: the pair every operator verb needs."""
    run_id = Step.objects.values_list("run_id", flat=True).get(pk=step_id)
    run = lock_run(run_id)
    return run, step_row(step_id)


@dataclass
class ItemRow(StepRow):
    """A fan-out item's row, as claimed and compensated."""

    key: str = ""
    item: Any = None


_ITEM_ROW_COLUMNS = "id, step_id, status, version, attempt, max_attempts, key, item"


def _item_row(row: Sequence[Any], step_name: str, connection: Any) -> ItemRow:
    pk, _, status, version, attempt, max_attempts, key, item = row
    item = _json(FanOutItem, "item", item, connection)
    return ItemRow(pk, step_name, status, version, attempt, max_attempts, key=key, item=item)


def take_items(
    step_id: int,
    step_name: str,
    *,
    from_status: str,
    limit: int,
    first: int | None = None,
    skip_locked: bool = False,
    **changes: Any,
) -> list[ItemRow]:
    """Compare-and-set the first ``limit`` items of a step still in ``from_status``, in one
    statement; return the rows it changed (new status, version and attempt), in item order.

    ``first``: an item to take before the others (the one a queue message named).
    The rows are picked by a subquery and the ``UPDATE`` restates ``from_status``, so a row
    another transaction moved since it was picked is left alone and not returned. On
    PostgreSQL the pick locks its rows ``SKIP LOCKED`` when asked: two workers taking
    ready items at the same moment take disjoint sets, neither waits for the other, and
    a row picked by one is skipped by the other rather than counted against its limit.
    """
    table = _quote(FanOutItem._meta.db_table)
    connection = _db()
    order = _quote("index")
    pick_params: list[Any] = [step_id, from_status]
    if first is not None:
        order = f"CASE WHEN id = %s THEN 0 ELSE 1 END, {order}"
        pick_params.append(first)
    pick_params.append(limit)
    lock = _for_update(connection, skip_locked=True) if skip_locked else ""
    # MATERIALIZED keeps PostgreSQL from folding the locking pick into the UPDATE: the
    # rows are picked (and locked) once, before any of them is updated.
    materialized = "MATERIALIZED " if connection.vendor == "postgresql" else ""
    pick = (
        f"WITH picked AS {materialized}(SELECT id FROM {table} WHERE step_id = %s "
        f"AND status = %s ORDER BY {order} LIMIT %s{lock}) "
    )
    sql, params = _update_sql(connection, FanOutItem, {"status": from_status}, changes)
    returning = f"{_ITEM_ROW_COLUMNS}, {_quote('index')}"
    rows = sorted(
        fetch_all(
            connection,
            f"{pick}{sql} AND id IN (SELECT id FROM picked) RETURNING {returning}",
            [*pick_params, *params],
        ),
        key=lambda row: row[-1],
    )
    return [_item_row(row[:-1], step_name, connection) for row in rows]


@dataclass(frozen=True)
class Fence:
    """The identity of one claimed attempt: a fenced write must find it unchanged."""

    pk: int
    version: int
    attempt: int


@dataclass(frozen=True)
class _FencedValue(SqlExpr):
    """A per-row new value of a fenced set-based update, read from the fence table."""

    cast: str = ""

    def render(self, vendor: str) -> tuple[str, tuple[Any, ...]]:
        if self.cast and vendor == "postgresql":
            return f"CAST(fence.new_value AS {self.cast})", ()
        return "fence.new_value", ()


def fenced_update_many(
    model: type[models.Model],
    fences: Sequence[Fence],
    *,
    owner: str,
    values: Sequence[Any] | None = None,
    value_field: str = "",
    **changes: Any,
) -> set[int]:
    """The set-based fenced write: update each row that still holds its attempt.

    One statement for the whole set: ``WITH fence AS (VALUES (id, version, attempt,
    value), …) UPDATE … FROM fence WHERE id = fence.unit_id AND version =
    fence.expected_version AND attempt = fence.expected_attempt AND lease_owner = ? AND
    status = 'running'``. ``values`` (with ``value_field``) gives each row its own
    new value (an output), in the order of ``fences``. Returns the ids of the rows it
    changed: a row whose lease was lost (reclaimed, cancelled, completed by another
    worker) does not match and is left exactly as it was.
    """
    if not fences:
        return set()
    connection = _db()
    rows, params = [], []
    field = model._meta.get_field(value_field) if value_field else None
    for index, fence in enumerate(fences):
        rows.append("(%s, %s, %s, %s)")
        value = values[index] if values is not None else None
        prepared = adapter(field, connection)(value, connection) if field is not None else None
        params += [fence.pk, fence.version, fence.attempt, prepared]
    if field is not None:
        cast = "jsonb" if isinstance(field, models.JSONField) else ""
        changes[value_field] = _FencedValue("", cast=cast)
    where = {"lease_owner": owner, "status": "running"}
    update, update_params = _update_sql(connection, model, where, changes, joined="fence")
    table = _quote(model._meta.db_table)
    sql = (
        "WITH fence (unit_id, expected_version, expected_attempt, new_value) AS "
        f"(VALUES {', '.join(rows)}) {update} AND {table}.id = fence.unit_id "
        f"AND {table}.{_quote('version')} = fence.expected_version "
        f"AND {table}.{_quote('attempt')} = fence.expected_attempt RETURNING {table}.id"
    )
    return {row[0] for row in fetch_all(connection, sql, [*params, *update_params])}


def next_pending_items(step_id: int, step_name: str, limit: int) -> list[ItemRow]:
    """The first ``limit`` pending items of a fan-out step, in item order."""
    sql = (
        f"SELECT {_ITEM_ROW_COLUMNS} FROM {_quote(FanOutItem._meta.db_table)} "
        "WHERE step_id = %s AND status = 'pending' ORDER BY " + _quote("index") + " LIMIT %s"
    )
    connection = _db()
    rows = fetch_all(connection, sql, [step_id, limit])
    return [_item_row(row, step_name, connection) for row in rows]


@dataclass
class FanOutCounts:
    """The counters of a fan-out step, as left by the last update."""

    status: str
    version: int
    total: int
    completed: int
    failed: int
    skipped: int

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.skipped


def bump_item_counter(step_id: int, counter: str, by: int = 1) -> FanOutCounts:
    """Add ``by`` to one counter of a fan-out step and return all counters.

    One ``UPDATE … RETURNING`` (SQLite 3.35+ and PostgreSQL): the counters change in the
    same transaction as the item, and concurrent items serialise on the step row.
    """
    assert counter in {"items_completed", "items_failed", "items_skipped"}
    column = _quote(counter)
    sql = (
        f"UPDATE {_quote(Step._meta.db_table)} SET {column} = {column} + %s, "
        f"{_quote('version')} = {_quote('version')} + 1 WHERE id = %s RETURNING status, "
        "version, items_total, items_completed, items_failed, items_skipped"
    )
    return FanOutCounts(*fetch_one(_db(), sql, [by, step_id]))


def item_counts(step_id: int) -> FanOutCounts:
    """Read the counters of a fan-out step without changing them."""
    return FanOutCounts(
        *Step.objects.values_list(
            "status", "version", "items_total", "items_completed", "items_failed", "items_skipped"
        ).get(pk=step_id)
    )


@dataclass(frozen=True)
class _ItemOutputs(SqlExpr):
    step_id: int = 0

    def render(self, vendor: str) -> tuple[str, tuple[Any, ...]]:
        item_table = _quote(FanOutItem._meta.db_table)
        if vendor == "postgresql":
            return (
                f"(SELECT COALESCE(jsonb_agg(i.output ORDER BY i.{_quote('index')}), "
                f"'[]'::jsonb) FROM {item_table} i WHERE i.step_id = %s)",
                (self.step_id,),
            )
        return (
            "(SELECT json_group_array(json(o.output)) FROM (SELECT output FROM "
            f"{item_table} WHERE step_id = %s ORDER BY {_quote('index')}) o)",
            (self.step_id,),
        )


def item_outputs(step_id: int) -> SqlExpr:
    """The fan-out step's output: its items' outputs in item order, built by the database.

    Used as the new value of ``output`` in the step's compare-and-set (``jsonb_agg`` /
    ``json_group_array``), so ten thousand outputs never pass through Python memory.
    """
    return _ItemOutputs("", step_id=step_id)


@dataclass
class ClaimRow:
    """A unit of leased work about to be claimed, with what its worker needs.

    One shape for steps, items and compensations: ``pk`` is the unit's own row; for a
    compensation ``item_key`` names the item it undoes (if any) and ``payload`` holds
    what it undoes. ``queue``, ``requires`` and ``held_on`` are the unit's routing and
    hold columns; ``business_key`` its run's (budgets count per business key).
    """

    pk: int
    status: str
    version: int
    attempt: int
    max_attempts: int
    step_id: int
    step_name: str
    generation: int
    run_id: UUID
    run_status: str
    run_input: dict[str, Any]
    workflow_name: str
    workflow_version: int
    queue: str
    requires: str
    held_on: str
    business_key: str
    item_key: str = ""
    item: Any = None
    handler: str = ""
    payload: Any = None


_CLAIM_COMMON = 17


def _claim_columns(step: str) -> str:
    return (
        f"u.id, u.status, u.version, u.attempt, u.max_attempts, {step}.id, {step}.name, "
        f"{step}.generation, r.id, r.status, r.input, r.workflow_name, r.workflow_version, "
        "u.queue, u.requires, u.held_on, r.business_key"
    )


def _read_claim(
    sql: str, params: Sequence[Any], *, locked: bool = True
) -> tuple[ClaimRow, Sequence[Any]] | None:
    """Run one claim read: the common columns as a :class:`ClaimRow`, and the rest.

    The unit's row is locked ``SKIP LOCKED`` on PostgreSQL, so a worker that receives a
    duplicate nudge for a unit another worker is claiming right now moves on instead of
    queueing behind it. ``None``: missing, or being claimed. Not ``locked``: a plain
    read, for a worker looking before it claims (:func:`~workflows.engine.claims.
    claimable`), outside any transaction.
    """
    connection = _db()
    lock = _for_update(connection, skip_locked=True, of="u") if locked else ""
    row = fetch_one(connection, f"{sql}{lock}", list(params))
    if row is None:
        return None
    claim = ClaimRow(*row[:_CLAIM_COMMON])
    claim.run_id = Run._meta.pk.to_python(claim.run_id)
    claim.run_input = _json(Run, "input", claim.run_input, connection)
    return claim, row[_CLAIM_COMMON:]


def _preferred(unit_table: str, named_id: int) -> tuple[str, list[Any]]:
    """The ``FROM``-less tail of a claim read that takes the named unit, or a ready unit
    of the same route with a higher priority whose run may start it.

    Queue messages are nudges in the order work became ready; priority is applied here,
    when a worker takes one: it claims the highest-priority ready unit of the route
    (the named unit's when none outranks it; oldest first among higher ones). Units
    held by a limit (``held_on``) are left to the nudge that releases them. No nudge is
    wasted: when another unit is taken instead of the named one, that unit's own nudge
    is still queued, and when it arrives and finds its unit already taken, it takes the
    best ready unit of the route instead (any priority) — the named unit, or better.
    """
    active = ", ".join(f"'{status}'" for status in sorted(RUN_ACTIVE))
    return (
        f"JOIN {unit_table} n ON n.id = %s WHERE u.status = '{StepStatus.READY}' "
        "AND u.queue = n.queue AND u.requires = n.requires AND (u.id = n.id OR "
        f"(u.held_on = '' AND r.status IN ({active}) "
        f"AND (u.priority > n.priority OR n.status <> '{StepStatus.READY}'))) "
        "ORDER BY u.priority DESC, u.updated_at, u.id LIMIT 1",
        [named_id],
    )


def claim_step_row(step_id: int, *, preferred: bool = True, locked: bool = True) -> ClaimRow | None:
    """Read a step and its run for claiming; with ``preferred``, a ready step of the
    same route with a higher priority instead, if there is one (:func:`_preferred`).
    ``locked``: as :func:`_read_claim`'s."""
    step, run = _quote(Step._meta.db_table), _quote(Run._meta.db_table)
    head = f"SELECT {_claim_columns('u')} FROM {step} u JOIN {run} r ON r.id = u.run_id "
    found = _read_claim(*_step_tail(step, step_id, preferred, head), locked=locked)
    return found[0] if found is not None else None


def _step_tail(table: str, unit_id: int, preferred: bool, head: str) -> tuple[str, list[Any]]:
    if not preferred:
        return f"{head}WHERE u.id = %s", [unit_id]
    tail, params = _preferred(table, unit_id)
    return f"{head}{tail}", params


def claim_item_row(item_id: int, *, preferred: bool = True, locked: bool = True) -> ClaimRow | None:
    """Read a fan-out item, its step and run for claiming (``preferred``, ``locked``: as
    for steps)."""
    item = _quote(FanOutItem._meta.db_table)
    step, run = _quote(Step._meta.db_table), _quote(Run._meta.db_table)
    head = (
        f"SELECT {_claim_columns('s')}, u.{_quote('key')}, u.item FROM {item} u "
        f"JOIN {step} s ON s.id = u.step_id JOIN {run} r ON r.id = s.run_id "
    )
    found = _read_claim(*_step_tail(item, item_id, preferred, head), locked=locked)
    if found is None:
        return None
    claim, (key, value) = found
    claim.item_key, claim.item = key, _json(FanOutItem, "item", value, _db())
    return claim


def claim_compensation_row(
    record_id: int, *, preferred: bool = False, locked: bool = True
) -> ClaimRow | None:
    """Read a compensation record, its step, run and item for claiming.

    Never another record: a run's compensations run one at a time in reverse order.
    ``locked``: as for steps.
    """
    record = _quote(CompensationRecord._meta.db_table)
    item = _quote(FanOutItem._meta.db_table)
    step, run = _quote(Step._meta.db_table), _quote(Run._meta.db_table)
    found = _read_claim(
        f"SELECT {_claim_columns('s')}, i.{_quote('key')}, u.payload, u.handler FROM {record} u "
        f"JOIN {step} s ON s.id = u.step_id JOIN {run} r ON r.id = u.run_id "
        f"LEFT JOIN {item} i ON i.id = u.item_id WHERE u.id = %s",
        [record_id],
        locked=locked,
    )
    if found is None:
        return None
    claim, (key, payload, handler) = found
    claim.payload = _json(CompensationRecord, "payload", payload, _db()) or {}
    claim.item_key, claim.item, claim.handler = key or "", claim.payload.get("item"), handler
    return claim


def insert_rows(model: type[models.Model], rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` (field name → value) with one multi-row ``INSERT``, as
    ``bulk_create`` would: a field a row leaves out gets its default, ``auto_now`` and
    ``auto_now_add`` fields the time of the call. The primary key must be automatic, and
    a default that differs from row to row (a UUID, a time) must be given in every row:
    defaults are adapted once per model (:func:`_default_row`).

    For the steps of a new run: ``bulk_create`` spent most of a run start preparing the
    thirty-odd values of each step through the ORM's compiler.
    """
    connection = _db()
    native_uuid = connection.features.has_native_uuid_field
    template = _default_row(model, connection.vendor, native_uuid)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    positions = _insert_positions(model)
    params: list[Any] = []
    for row in rows:
        values = [now if value is _NOW_PLACEHOLDER else value for value in template]
        for name, value in row.items():
            values[positions[name]] = _prep_of(model, name, native_uuid)(value, connection)
        params += values
    execute(connection, _insert_text(model, len(rows)), params)


_NOW_PLACEHOLDER = object()


@functools.cache
def _inserted_fields(model: type[models.Model]) -> tuple[models.Field, ...]:
    if not isinstance(model._meta.pk, models.AutoField | models.BigAutoField):
        raise TypeError(f"insert_rows needs an automatic primary key; {model.__name__} has none")
    return tuple(field for field in model._meta.concrete_fields if field is not model._meta.pk)


@functools.cache
def _insert_positions(model: type[models.Model]) -> dict[str, int]:
    return {field.name: index for index, field in enumerate(_inserted_fields(model))}


@functools.cache
def _default_row(model: type[models.Model], vendor: str, native_uuid: bool) -> tuple[Any, ...]:
    """Each inserted field's default, as stored; ``auto_now`` fields marked for the time.

    Adapted once per model and backend: the defaults of these models are constants or
    empty JSON containers, whose stored form never changes.
    """
    connection = _db()
    assert connection.vendor == vendor
    values: list[Any] = []
    for field in _inserted_fields(model):
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            values.append(_NOW_PLACEHOLDER)
        else:
            prep = _prep_of(model, field.name, native_uuid)
            values.append(prep(field.get_default(), connection))
    return tuple(values)


@functools.lru_cache(maxsize=256)
def _insert_text(model: type[models.Model], rows: int) -> str:
    fields = _inserted_fields(model)
    columns = ", ".join(_quote(field.column) for field in fields)
    values = ", ".join([f"({', '.join(['%s'] * len(fields))})"] * rows)
    return f"INSERT INTO {_quote(model._meta.db_table)} ({columns}) VALUES {values}"


def insert_events(events: Sequence[tuple[UUID, int | None, str, dict[str, Any]]]) -> None:
    """Insert (run id, step id, type, payload) event rows with one multi-row ``INSERT``."""
    connection = _db()
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    run_key = adapter(Event._meta.get_field("run"), connection)
    payload = adapter(Event._meta.get_field("payload"), connection)
    params: list[Any] = []
    for run, step, kind, data in events:
        params += [run_key(run, connection), step, kind, payload(data, connection), now, False]
    execute(connection, _insert_events_text(len(events)), params)


@functools.lru_cache(maxsize=64)
def _insert_events_text(rows: int) -> str:
    columns = ", ".join(
        _column(Event, name)[1] for name in ("run", "step", "type", "payload", "created_at")
    )
    values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * rows)
    return (
        f"INSERT INTO {_quote(Event._meta.db_table)} ({columns}, {_quote('published')}) "
        f"VALUES {values}"
    )
