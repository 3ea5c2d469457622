"""Compare-and-set updates: every state-changing ``UPDATE`` the engine writes by hand.

Each states the state it expects in its ``WHERE`` clause and bumps ``version``, so a
concurrent compare-and-set that read the row before sees it changed: one row
(:func:`cas_update`, :func:`move_row`) or a set (:func:`cas_update_many`,
:func:`take_items`, :func:`fenced_update_many`), which return the rows they changed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from uuid import UUID

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from workflows.engine.sql.adapters import adapter, field_prep
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import execute, fetch_all
from workflows.engine.sql.expressions import SqlExpr, db_now
from workflows.engine.sql.identifiers import column, table
from workflows.engine.sql.locks import row_lock
from workflows.engine.sql.rows import ITEM_ROW_COLUMNS, ItemRow, item_row
from workflows.errors import StaleState
from workflows.models import FanOutItem


def update_sql(
    connection: BaseDatabaseWrapper,
    model: type[models.Model],
    where: dict[str, Any],
    changes: dict[str, Any],
    *,
    joined: Literal["", "fence"] = "",
) -> tuple[str, list[Any]]:
    """``UPDATE … SET version = version + 1, <changes> [FROM joined] WHERE <where>``.

    A ``where`` value that is a list, tuple or set becomes ``IN (…)``, ``None`` becomes
    ``IS NULL``, any other value ``= %s``; a key ``<field>__gt`` with an
    :class:`~.expressions.SqlExpr` becomes ``<field> > <expression>`` (a lease still
    live on the database clock: ``lease_expires_at__gt=db_now()``). Every statement
    built here bumps ``version``: a concurrent compare-and-set that read the row before
    sees it changed. ``joined``
    names a table of the statement's ``WITH`` clause to join (``UPDATE … FROM``); its
    columns must not share names with the model's. The text is built once per shape
    (:func:`_update_text`); only the parameters are built per call.
    """
    vendor, native_uuid = connection.vendor, connection.features.has_native_uuid_field
    params: list[Any] = []
    assigned: list[tuple[str, str | None]] = []
    for name, value in changes.items():
        # A value of a plain type is neither an expression nor a model: no isinstance.
        if value.__class__ not in _STORED and isinstance(value, SqlExpr):
            sql, extra = value.render(vendor)
            assigned.append((name, sql))
            params.extend(extra)
        else:
            if value.__class__ not in _STORED and isinstance(value, models.Model):
                value = value.pk  # a related object is stored by its key
            assigned.append((name, None))
            params.append(field_prep(model, name, native_uuid)(value, connection))
    matched: list[tuple[str, int | str | None]] = []
    for name, value in where.items():
        if value.__class__ in _MATCHED:  # the usual case, asked first
            matched.append((name, 0))
            params.append(field_prep(model, name, native_uuid)(value, connection))
        elif value is None:
            matched.append((name, None))
        elif name.endswith("__gt"):
            assert isinstance(value, SqlExpr), f"{name} compares with an expression"
            sql, extra = value.render(vendor)
            matched.append((name.removesuffix("__gt"), f"> {sql}"))
            params.extend(extra)
        elif isinstance(value, _SEQUENCES):
            matched.append((name, len(value)))
            prep = field_prep(model, name, native_uuid)
            params.extend([prep(one, connection) for one in value])
        else:
            matched.append((name, 0))
            params.append(field_prep(model, name, native_uuid)(value, connection))
    return _update_text(model, tuple(assigned), tuple(matched), joined), params


# The types of new values stored as parameters, never expressions nor models; the types
# of a ``where`` value compared with ``= %s``; those matched with ``IN (…)``.
_STORED = frozenset({str, int, float, bool, type(None), dict, list})
_MATCHED = frozenset({str, int, bool, UUID})
_SEQUENCES = (list, tuple, set, frozenset)


@functools.lru_cache(maxsize=512)
def _update_text(
    model: type[models.Model],
    assigned: tuple[tuple[str, str | None], ...],
    matched: tuple[tuple[str, int | str | None], ...],
    joined: Literal["", "fence"],
) -> str:
    """The text of an ``UPDATE`` of :func:`update_sql`'s shape.

    ``assigned``: (field, SQL of its new value, or ``None`` for a parameter);
    ``matched``: (field, ``None`` for ``IS NULL``, 0 for ``= %s``, n for ``IN`` of n,
    or the text of a comparison with an expression).
    """
    assignments = [f"{column(model, 'version')} = {column(model, 'version')} + 1"]
    for name, sql in assigned:
        assignments.append(f"{column(model, name)} = {sql if sql is not None else '%s'}")
    conditions = []
    for name, count in matched:
        matched_column = column(model, name)
        if count is None:
            conditions.append(f"{matched_column} IS NULL")
        elif isinstance(count, str):
            conditions.append(f"{matched_column} {count}")
        elif count:
            conditions.append(f"{matched_column} IN ({', '.join(['%s'] * count)})")
        else:
            conditions.append(f"{matched_column} = %s")
    return (
        f"UPDATE {table(model)} SET {', '.join(assignments)} "
        f"{f'FROM {joined} ' if joined else ''}WHERE {' AND '.join(conditions)}"
    )


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
    connection = engine_connection()
    sql, params = update_sql(connection, model, conditions, changes)
    return execute(connection, sql, params) == 1


class StatusRow(Protocol):
    """A row read with its status and version: a step or item row, a flow."""

    pk: Any
    status: str
    version: int


def move_row(
    model: type[models.Model],
    row: StatusRow,
    status: str,
    label: str,
    *,
    details: Mapping[str, Any] | None = None,
    **changes: Any,
) -> None:
    """Compare-and-set ``row`` (a run, a step, an item, a flow) from its status to
    ``status``, writing ``changes`` with it.

    Raises :class:`StaleState` naming ``label`` (with ``details``) when the row moved
    meanwhile; on success ``row`` carries the new status and version.
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
        raise StaleState(f"{label} changed while moving {row.status} → {status}", **(details or {}))
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
    connection = engine_connection()
    sql, params = update_sql(connection, model, where, changes)
    columns = ", ".join(column(model, name) for name in returning)
    return fetch_all(connection, f"{sql} RETURNING {columns}", params)


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
    items = table(FanOutItem)
    connection = engine_connection()
    order = column(FanOutItem, "index")
    pick_params: list[Any] = [step_id, from_status]
    if first is not None:
        order = f"CASE WHEN id = %s THEN 0 ELSE 1 END, {order}"
        pick_params.append(first)
    pick_params.append(limit)
    lock = row_lock(connection, skip_locked=True) if skip_locked else ""
    # MATERIALIZED keeps PostgreSQL from folding the locking pick into the UPDATE: the
    # rows are picked (and locked) once, before any of them is updated.
    materialized = "MATERIALIZED " if connection.vendor == "postgresql" else ""
    pick = (
        f"WITH picked AS {materialized}(SELECT id FROM {items} WHERE step_id = %s "
        f"AND status = %s ORDER BY {order} LIMIT %s{lock}) "
    )
    sql, params = update_sql(connection, FanOutItem, {"status": from_status}, changes)
    returning = f"{ITEM_ROW_COLUMNS}, {column(FanOutItem, 'index')}"
    rows = sorted(
        fetch_all(
            connection,
            f"{pick}{sql} AND id IN (SELECT id FROM picked) RETURNING {returning}",
            [*pick_params, *params],
        ),
        key=lambda row: row[-1],
    )
    return [item_row(row[:-1], step_name, connection) for row in rows]


# What a fenced write adds to its ``WHERE`` when the lease must still be live on the
# database clock (a heartbeat): an expired lease is not renewed, even before a reclaim.
LIVE_LEASE: Mapping[str, Any] = {"lease_expires_at__gt": db_now()}


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
    live: bool = False,
    **changes: Any,
) -> set[int]:
    """The set-based fenced write: update each row that still holds its attempt.

    One statement for the whole set: ``WITH fence AS (VALUES (id, version, attempt,
    value), …) UPDATE … FROM fence WHERE id = fence.unit_id AND version =
    fence.expected_version AND attempt = fence.expected_attempt AND lease_owner = ? AND
    status = 'running'``. ``values`` (with ``value_field``) gives each row its own
    new value (an output), in the order of ``fences``. ``live``: a row whose lease
    expired does not match either (:data:`LIVE_LEASE`). Returns the ids of the rows it
    changed: a row whose lease was lost (reclaimed, cancelled, completed by another
    worker) does not match and is left exactly as it was.
    """
    if not fences:
        return set()
    connection = engine_connection()
    rows, params = [], []
    field = model._meta.get_field(value_field) if value_field else None
    assert field is None or isinstance(field, models.Field), f"{value_field} has no column"
    for index, fence in enumerate(fences):
        rows.append("(%s, %s, %s, %s)")
        value = values[index] if values is not None else None
        prepared = adapter(field, connection)(value, connection) if field is not None else None
        params += [fence.pk, fence.version, fence.attempt, prepared]
    if field is not None:
        cast = "jsonb" if isinstance(field, models.JSONField) else ""
        changes[value_field] = _FencedValue("", cast=cast)
    where = {"lease_owner": owner, "status": "running", **(LIVE_LEASE if live else {})}
    update, update_params = update_sql(connection, model, where, changes, joined="fence")
    target = table(model)
    sql = (
        "WITH fence (unit_id, expected_version, expected_attempt, new_value) AS "
        f"(VALUES {', '.join(rows)}) {update} AND {target}.id = fence.unit_id "
        f"AND {target}.{column(model, 'version')} = fence.expected_version "
        f"AND {target}.{column(model, 'attempt')} = fence.expected_attempt RETURNING {target}.id"
    )
    return {row[0] for row in fetch_all(connection, sql, [*params, *update_params])}
