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

from workflows.engine.dbapi import fetch_all
from workflows.engine.sql import _db, _for_update, _quote, _run_key, cas_update, db_now
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


def _live_holder_sql() -> str:
    """SQL true when slot ``s`` is still held by its holder."""
    clauses = [
        f"(s.holder_kind = '{kind}' AND EXISTS (SELECT 1 FROM {_quote(model._meta.db_table)} u "
        f"WHERE u.id = s.holder_id AND u.status = '{StepStatus.RUNNING}' "
        "AND u.attempt = s.holder_attempt))"
        for kind, model in _UNIT_TABLES.items()
    ]
    ended = ", ".join(f"'{status}'" for status in RUN_NOT_HOLDING)
    clauses.append(
        f"(s.holder_kind = 'run' AND EXISTS (SELECT 1 FROM {_quote(Run._meta.db_table)} r "
        f"WHERE r.id = s.holder_run_id AND r.status NOT IN ({ended})))"
    )
    return "(" + " OR ".join(clauses) + ")"


_SLOTS = _quote(ConcurrencySlot._meta.db_table)


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
    connection = _db()
    sql = (
        f"SELECT s.id, s.version FROM {_SLOTS} s WHERE s.{_quote('key')} = %s AND s.slot < %s "
        f"AND (s.holder_kind = '' OR NOT {_live_holder_sql()}) ORDER BY s.slot"
        f"{_for_update(connection, skip_locked=True, of='s')}"
    )
    found = fetch_all(connection, sql, (key, limit))
    if found or _count(key) >= limit:
        return found
    _create(key, limit)
    return fetch_all(connection, sql, (key, limit))


def _count(key: str) -> int:
    connection = _db()
    found = fetch_all(
        connection, f"SELECT COUNT(*) FROM {_SLOTS} WHERE {_quote('key')} = %s", (key,)
    )
    return found[0][0]


def _create(key: str, limit: int) -> None:
    """Create the missing slots ``0 .. limit - 1`` of ``key``; another transaction
    creating them at the same moment is not an error."""
    ConcurrencySlot.objects.using(_db().alias).bulk_create(
        [ConcurrencySlot(key=key, slot=number) for number in range(limit)],
        ignore_conflicts=True,
    )


def release(holder: Holder) -> list[str]:
    """Empty the slots ``holder`` took; return their keys (where work may now start).

    Set-based, stating the holder it expects: a slot another holder took since (after
    the holder's lease was reclaimed) is left alone.
    """
    connection = _db()
    where = "holder_kind = %s AND "
    params: list[Any] = [holder.kind]
    if holder.kind == "run":
        where += "holder_run_id = %s"
        params.append(_run_key(holder.run_id, connection))
    else:
        where += "holder_id = %s AND holder_attempt = %s"
        params += [holder.unit_id, holder.attempt]
    rows = fetch_all(
        connection,
        f"UPDATE {_SLOTS} SET holder_kind = '', holder_id = NULL, holder_attempt = 0, "
        f"holder_run_id = NULL, version = version + 1 WHERE {where} RETURNING {_quote('key')}",
        params,
    )
    return [key for (key,) in rows]


def held(key: str) -> int:
    """How many slots of ``key`` are held now (for ``explain`` and the admin)."""
    connection = _db()
    found = fetch_all(
        connection,
        f"SELECT COUNT(*) FROM {_SLOTS} s WHERE s.{_quote('key')} = %s "
        f"AND s.holder_kind <> '' AND {_live_holder_sql()}",
        (key,),
    )
    return found[0][0]
