"""The event history: collected during a transition, inserted with one statement at its end."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from workflows.engine.sql.inserts import EventRow, insert_events
from workflows.engine.wakeups import events_written

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

_T = TypeVar("_T")


def actor(user: AnyUser | None) -> str | None:
    """Who did it, as the history records it: the user's name, or ``None`` for the system."""
    return user.get_username() if user is not None else None


class EventLog:
    """Event rows of one transition, written in the same transaction as its state."""

    def __init__(self) -> None:
        self._rows: list[EventRow] = []

    def add(self, run_id: UUID, type: str, *, step_id: int | None = None, **payload: Any) -> None:
        """An event of a run (or one of its steps)."""
        self._rows.append(EventRow(run_id, step_id, type, payload))

    def add_to_flow(
        self, flow_id: UUID, type: str, *, run_id: UUID | None = None, **payload: Any
    ) -> None:
        """An event of a flow: of the whole (``run_id`` empty), or of one of its members,
        which is then in that run's history too."""
        self._rows.append(EventRow(run_id, None, type, payload, flow_id))

    def carried_by(self, statement: Callable[[list[EventRow]], tuple[_T, list[EventRow]]]) -> _T:
        """Hand the rows recorded so far to ``statement``, which may insert them itself
        (PostgreSQL's claim of the next step carries them: :mod:`~workflows.engine.sql.
        logged_updates`); keep the rows it returns as still to insert, and return its result.
        """
        result, self._rows = statement(self._rows)
        return result

    def __len__(self) -> int:
        return len(self._rows)

    def flush(self) -> None:
        """Insert the rows; their commit wakes ``events`` and each run's ``run:<id>``
        (by the event table's trigger on PostgreSQL, in-process elsewhere)."""
        if self._rows:
            insert_events(self._rows)
            events_written([row.run for row in self._rows])
            self._rows = []
