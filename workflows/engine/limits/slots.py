"""Concurrency slots: at most N holders of one key at once, across every worker.

A key has N numbered rows in ``ConcurrencySlot`` (created on first use). Taking a slot
is a compare-and-set on one free row, inside the caller's transition, so two workers
racing for the last slot cannot both win: the loser's ``UPDATE … WHERE version = ?``
changes nothing and it tries the next free row, or gives up.

A slot is free when it has no holder or its holder no longer holds it: a step or item
that is no longer ``running`` at the attempt that took the slot, or a run that has
ended. Freedom is computed from the holder's own row, so a crashed worker's slot comes
back as soon as its lease is reclaimed, and no release can be forgotten. Releasing
explicitly (:func:`release`) only tidies the row and tells the caller which keys just
gained a free slot, so it can start the work that waits for one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from workflows.engine.sql.adapters import stored_run_id
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import fetch_all
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.identifiers import column, table
from workflows.engine.sql.locks import row_lock
from workflows.engine.sql.updates import cas_update
from workflows.models import ConcurrencySlot, FanOutItem, Run, Step
from workflows.status import RUN_FINAL, RunStatus, StepStatus

# What each kind of holder is, and how a slot tells whether it still holds.
_UNIT_TABLES = {"step": Step, "item": FanOutItem}
# A run holds its slot from its start to its end; a queued run holds none.
RUN_NOT_HOLDING = (*sorted(RUN_FINAL), RunStatus.QUEUED)


@dataclass(frozen=True)
class Holder:
    """Who takes a slot: an attempt of a step or item, or a run."""

    kind: str  # "step", "item" or "run"
    unit_id: int | None = None
    attempt: int = 0
    run_id: UUID | None = None

    def columns(self) -> dict[str, Any]:
        return {
            "holder_kind": self.kind,
            "holder_id": self.unit_id,
            "holder_attempt": self.attempt,
            "holder_run": self.run_id,
        }


def _live_holder_sql() -> tuple[str, list[Any]]:
    """SQL true when slot ``s`` is still held by its holder, and its parameters."""
    clauses, params = [], []
    for kind, model in _UNIT_TABLES.items():
        clauses.append(
            f"(s.holder_kind = %s AND EXISTS (SELECT 1 FROM {table(model)} u "
            "WHERE u.id = s.holder_id AND u.status = %s AND u.attempt = s.holder_attempt))"
        )
        params += [kind, StepStatus.RUNNING]
    clauses.append(
        f"(s.holder_kind = %s AND EXISTS (SELECT 1 FROM {table(Run)} r "
        f"WHERE r.id = s.holder_run_id AND r.status NOT IN "
        f"({', '.join(['%s'] * len(RUN_NOT_HOLDING))})))"
    )
    params += ["run", *RUN_NOT_HOLDING]
    return "(" + " OR ".join(clauses) + ")", params


_SLOTS, _KEY = table(ConcurrencySlot), column(ConcurrencySlot, "key")


def acquire(key: str, limit: int, holder: Holder) -> bool:
    """Take one of the first ``limit`` slots of ``key`` for ``holder``; ``False`` when
    all are held.

    Inside the caller's transition: the slot is taken only if it commits. Two holders
    racing for one free slot both read it free; the first compare-and-set wins and the
    other tries the next free slot (on PostgreSQL, slots another transaction has locked
    are skipped). Declarations sharing a key with different limits each count the
    holders of their own first ``limit`` slots.
    """
    for free in _free_slots(key, limit):
        slot_id, version = free
        if cas_update(
            ConcurrencySlot,
            slot_id,
            version=version,
            acquired_at=db_now(),
            **holder.columns(),
        ):
            return True
    return False


def _free_slots(key: str, limit: int) -> Sequence[tuple[int, int]]:
    connection = engine_connection()
    live, live_params = _live_holder_sql()
    sql = (
        f"SELECT s.id, s.version FROM {_SLOTS} s WHERE s.{_KEY} = %s AND s.slot < %s "
        f"AND (s.holder_kind = '' OR NOT {live}) ORDER BY s.slot"
        f"{row_lock(connection, skip_locked=True, of='s')}"
    )
    params = (key, limit, *live_params)
    found = fetch_all(connection, sql, params)
    if found or _count(key) >= limit:
        return found
    _create(key, limit)
    return fetch_all(connection, sql, params)


def _count(key: str) -> int:
    connection = engine_connection()
    found = fetch_all(connection, f"SELECT COUNT(*) FROM {_SLOTS} WHERE {_KEY} = %s", (key,))
    return found[0][0]


def _create(key: str, limit: int) -> None:
    """Create the missing slots ``0 .. limit - 1`` of ``key``; another transaction
    creating them at the same moment is not an error."""
    ConcurrencySlot.objects.using(engine_connection().alias).bulk_create(
        [ConcurrencySlot(key=key, slot=number) for number in range(limit)],
        ignore_conflicts=True,
    )


def release(holder: Holder) -> list[str]:
    """Empty the slots ``holder`` took; return their keys (where work may now start).

    Set-based, stating the holder it expects: a slot another holder took since (after
    the holder's lease was reclaimed) is left alone.
    """
    connection = engine_connection()
    where = "holder_kind = %s AND "
    params: list[Any] = [holder.kind]
    if holder.kind == "run":
        assert holder.run_id is not None, "a run holds its slots by its id"
        where += "holder_run_id = %s"
        params.append(stored_run_id(holder.run_id, connection))
    else:
        where += "holder_id = %s AND holder_attempt = %s"
        params += [holder.unit_id, holder.attempt]
    rows = fetch_all(
        connection,
        f"UPDATE {_SLOTS} SET holder_kind = '', holder_id = NULL, holder_attempt = 0, "
        f"holder_run_id = NULL, version = version + 1 WHERE {where} RETURNING {_KEY}",
        params,
    )
    return [key for (key,) in rows]


def held(key: str) -> int:
    """How many slots of ``key`` are held now (for ``explain`` and the admin)."""
    connection = engine_connection()
    live, live_params = _live_holder_sql()
    found = fetch_all(
        connection,
        f"SELECT COUNT(*) FROM {_SLOTS} s WHERE s.{_KEY} = %s AND s.holder_kind <> '' AND {live}",
        (key, *live_params),
    )
    return found[0][0]
