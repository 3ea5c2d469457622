"""The event history: collected during a transition, inserted with one statement at its end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.engine.sql.inserts import insert_events

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def actor(user: AnyUser | None) -> str | None:
    """Who did it, as the history records it: the user's name, or ``None`` for the system."""
    return user.get_username() if user is not None else None


class EventLog:
    """Event rows of one transition, written in the same transaction as its state."""

    def __init__(self) -> None:
        self._rows: list[tuple[UUID, int | None, str, dict[str, Any]]] = []

    def add(self, run_id: UUID, type: str, *, step_id: int | None = None, **payload: Any) -> None:
        self._rows.append((run_id, step_id, type, payload))

    def __len__(self) -> int:
        return len(self._rows)

    def flush(self) -> None:
        if self._rows:
            insert_events(self._rows)
            self._rows = []
