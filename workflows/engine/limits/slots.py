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

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.limit_rows import (
    FreeSlot,
    empty_run_slots,
    empty_unit_slots,
    free_slots,
    held_slot_count,
    slot_count,
    take_slot,
)
from workflows.models import ConcurrencySlot


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


def acquire(key: str, limit: int, holder: Holder) -> bool:
    """Take one of the first ``limit`` slots of ``key`` for ``holder``; ``False`` when
    all are held.

    Inside the caller's transition: the slot is taken only if it commits. Two holders
    racing for one free slot both read it free; the first compare-and-set wins and the
    other tries the next free slot (on PostgreSQL, slots another transaction has locked
    are skipped). The compare-and-set judges the slot free again, on what has committed
    by then (:func:`~workflows.engine.sql.limit_rows.take_slot`). Declarations sharing a
    key with different limits each count the holders of their own first ``limit``
    slots.
    """
    changes = {"acquired_at": db_now(), **holder.columns()}
    return any(take_slot(free, changes) for free in _free_slots(key, limit))


def _free_slots(key: str, limit: int) -> Sequence[FreeSlot]:
    """The free slots among the first ``limit`` of ``key``; when there are none because
    fewer than ``limit`` exist, the missing ones are created and read again."""
    found = free_slots(key, limit)
    if found or slot_count(key) >= limit:
        return found
    _create(key, limit)
    return free_slots(key, limit)


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
    if holder.kind == "run":
        assert holder.run_id is not None, "a run holds its slots by its id"
        return empty_run_slots(holder.run_id)
    return empty_unit_slots(holder.kind, holder.unit_id, holder.attempt)


def held(key: str) -> int:
    """How many slots of ``key`` are held now (for ``explain`` and the admin)."""
    return held_slot_count(key)
