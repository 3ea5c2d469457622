"""The rows limits count in: concurrency slots and rate buckets.

What a limit allows is decided in :mod:`workflows.engine.limits` (``slots``, ``rates``),
inside the claim's transaction; these statements read those rows (locked where the
claim then compares and sets them) and empty the slots an attempt or a run took.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from uuid import UUID

from workflows.engine.sql.adapters import from_db_json, stored_run_id
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import execute, fetch_all, fetch_one
from workflows.engine.sql.identifiers import column, table
from workflows.engine.sql.locks import row_lock
from workflows.engine.sql.updates import update_sql
from workflows.models import ConcurrencySlot, FanOutItem, RateBucket, Run, Step
from workflows.status import RUN_FINAL, RunStatus, StepStatus

# -- concurrency slots -----------------------------------------------------------------

_SLOTS, _KEY = table(ConcurrencySlot), column(ConcurrencySlot, "key")
# The table of each kind of unit that holds a slot (a slot's ``holder_kind``).
_UNIT_TABLES = {"step": Step, "item": FanOutItem}
# A run holds its slot from its start to its end; a queued run holds none.
_RUN_NOT_HOLDING = (*sorted(RUN_FINAL), RunStatus.QUEUED, RunStatus.BLOCKED)


def _live_holder_sql(slot: str = "s") -> tuple[str, list[Any]]:
    """SQL true when the slot row ``slot`` (an alias, or the table's own name in an
    ``UPDATE``) is still held by its holder, and its parameters.

    Freedom is computed from the holder's own row (a step or item still ``running`` at
    the attempt that took the slot, a run not ended), so a crashed worker's slot comes
    back as soon as its lease is reclaimed.
    """
    clauses, params = [], []
    for kind, model in _UNIT_TABLES.items():
        clauses.append(
            f"({slot}.holder_kind = %s AND EXISTS (SELECT 1 FROM {table(model)} u "
            f"WHERE u.id = {slot}.holder_id AND u.status = %s "
            f"AND u.attempt = {slot}.holder_attempt))"
        )
        params += [kind, StepStatus.RUNNING]
    clauses.append(
        f"({slot}.holder_kind = %s AND EXISTS (SELECT 1 FROM {table(Run)} r "
        f"WHERE r.id = {slot}.holder_run_id AND r.status NOT IN "
        f"({', '.join(['%s'] * len(_RUN_NOT_HOLDING))})))"
    )
    params += ["run", *_RUN_NOT_HOLDING]
    return "(" + " OR ".join(clauses) + ")", params


class FreeSlot(NamedTuple):
    """A slot no live holder holds, at the version a compare-and-set must find."""

    pk: int
    version: int


def free_slots(key: str, limit: int) -> list[FreeSlot]:
    """The free slots among the first ``limit`` of ``key``, in slot order.

    Locked ``SKIP LOCKED`` on PostgreSQL: two claims never pick the same slot, and a
    slot another transaction is taking is skipped rather than waited for.
    """
    connection = engine_connection()
    live, live_params = _live_holder_sql()
    sql = (
        f"SELECT s.id, s.version FROM {_SLOTS} s WHERE s.{_KEY} = %s AND s.slot < %s "
        f"AND (s.holder_kind = '' OR NOT {live}) ORDER BY s.slot"
        f"{row_lock(connection, skip_locked=True, of='s')}"
    )
    return [FreeSlot(*row) for row in fetch_all(connection, sql, (key, limit, *live_params))]


def take_slot(slot: FreeSlot, changes: dict[str, Any]) -> bool:
    """Compare-and-set ``slot`` to ``changes`` (its new holder) if it is still free; return
    whether it was.

    The ``WHERE`` states the freedom :func:`free_slots` read, judged again by this
    statement. On PostgreSQL a slot read free may have been taken by a transaction that
    committed between the read's snapshot and its lock: the lock then re-checks the
    newest row, but judges its new holder's liveness on the read's older snapshot, in
    which that holder's step was not yet running, and returns the row with its new
    version. This statement's own snapshot sees the holder's commit.
    """
    connection = engine_connection()
    sql, params = update_sql(
        connection, ConcurrencySlot, {"id": slot.pk, "version": slot.version}, changes
    )
    live, live_params = _live_holder_sql(_SLOTS)
    free = f" AND ({_SLOTS}.holder_kind = '' OR NOT {live})"
    return execute(connection, sql + free, [*params, *live_params]) == 1


def slot_count(key: str) -> int:
    """How many slots of ``key`` exist, held or free."""
    sql = f"SELECT COUNT(*) FROM {_SLOTS} WHERE {_KEY} = %s"
    return fetch_all(engine_connection(), sql, (key,))[0][0]


def held_slot_count(key: str) -> int:
    """How many slots of ``key`` a live holder holds now."""
    live, live_params = _live_holder_sql()
    sql = f"SELECT COUNT(*) FROM {_SLOTS} s WHERE s.{_KEY} = %s AND s.holder_kind <> '' AND {live}"
    return fetch_all(engine_connection(), sql, (key, *live_params))[0][0]


_EMPTY_SLOTS = (
    f"UPDATE {_SLOTS} SET holder_kind = '', holder_id = NULL, holder_attempt = 0, "
    "holder_run_id = NULL, version = version + 1 WHERE holder_kind = %s AND "
)


def empty_unit_slots(kind: str, unit_id: int | None, attempt: int) -> list[str]:
    """Empty the slots the attempt ``attempt`` of unit ``unit_id`` (holder kind ``kind``,
    ``"step"`` or ``"item"``) took; return their keys.

    Set-based, stating the holder it expects: a slot another holder took since (after
    the holder's lease was reclaimed) is left alone.
    """
    sql = f"{_EMPTY_SLOTS}holder_id = %s AND holder_attempt = %s RETURNING {_KEY}"
    rows = fetch_all(engine_connection(), sql, [kind, unit_id, attempt])
    return [key for (key,) in rows]


def empty_run_slots(run_id: UUID) -> list[str]:
    """Empty the slots run ``run_id`` took (``max_concurrent_runs``); return their keys."""
    connection = engine_connection()
    sql = f"{_EMPTY_SLOTS}holder_run_id = %s RETURNING {_KEY}"
    rows = fetch_all(connection, sql, ["run", stored_run_id(run_id, connection)])
    return [key for (key,) in rows]


# -- rate buckets ----------------------------------------------------------------------

_BUCKETS = table(RateBucket)


def _epoch_now(vendor: str) -> str:
    """The database clock in seconds since the epoch, as a float: the one clock every
    host's starts are recorded on."""
    if vendor == "postgresql":
        return "EXTRACT(EPOCH FROM STATEMENT_TIMESTAMP())::float8"
    return "(JULIANDAY('now') - 2440587.5) * 86400.0"


class RateBucketRow(NamedTuple):
    """A rate bucket as read locked: its recorded starts and the database clock."""

    pk: int
    version: int
    starts: list[float]  # moments of recorded starts, seconds since the epoch
    now: float


def locked_rate_bucket(key: str) -> RateBucketRow | None:
    """The bucket of ``key``, locked until commit (``FOR NO KEY UPDATE`` on PostgreSQL:
    a second claim waits, then sees the first one's start); ``None`` when it has none."""
    connection = engine_connection()
    sql = (
        f"SELECT id, starts, version, {_epoch_now(connection.vendor)} FROM {_BUCKETS} "
        f"WHERE {column(RateBucket, 'key')} = %s{row_lock(connection)}"
    )
    row = fetch_one(connection, sql, [key])
    if row is None:
        return None
    pk, starts, version, now = row
    return RateBucketRow(
        pk, version, from_db_json(RateBucket, "starts", starts, connection) or [], now
    )
