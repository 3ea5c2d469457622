"""Events in commit order: cursors that never skip an event.

An event's id is handed out when it is inserted, not when its transaction commits. On
PostgreSQL two transitions commit in parallel, so transaction A may insert event 100,
transaction B event 101, and B commit first: a reader that has seen 101 and asks for
"after 101" never sees 100. Ordering by id alone skips events.

The order read here is ``(xid, id)``: ``Event.xid`` is the writing transaction's id
(``pg_current_xact_id()``, the column's default on PostgreSQL). A reader sees only events
below the *visibility horizon*, ``pg_snapshot_xmin(pg_current_snapshot())``: every
transaction with a lower xid has ended (committed or rolled back), so no event can ever
appear before a position the reader has moved to. A transaction still open holds the
horizon back: its events, and every later transaction's, wait until it ends. That
delays a reader and never makes it skip. A reader also sees the events of its own
transaction (read your writes); acknowledge positions outside a transaction that
writes events, or an older transaction still open may commit behind them.

On SQLite writers commit one at a time, in id order: ``xid`` is 0 for every event, the
order is the id's, and there is no horizon to respect.

:class:`Position` is a point in that order; :func:`encode_cursor` and
:func:`decode_cursor` turn it into the opaque string consumers acknowledge (signed, so a
made-up or altered cursor is refused before any query).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.core import signing
from django.db import connections, router
from django.db.models import BooleanField, F, Q, QuerySet
from django.db.models.expressions import RawSQL

from workflows.engine.sql.identifiers import column, table
from workflows.errors import InvalidInput
from workflows.models import Event

__all__ = [
    "START",
    "Position",
    "decode_cursor",
    "encode_cursor",
    "events_after",
    "position_of",
    "readable",
    "run_events_after",
]

_CURSOR_SALT = "workflows.queries.event_cursor"


@dataclass(frozen=True, order=True)
class Position:
    """A point in commit order: the event ``(xid, id)``; what follows it is after it."""

    xid: int
    id: int

    def follows(self) -> Q:
        """The events after this position."""
        return Q(xid__gt=self.xid) | Q(xid=self.xid, id__gt=self.id)


# Before every event.
START = Position(0, 0)


def _horizon_sql() -> str:
    xid = f"{table(Event)}.{column(Event, 'xid')}"
    return (
        f"({xid} < pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
        f" OR {xid} = pg_current_xact_id_if_assigned()::text::bigint)"
    )


def readable(events: QuerySet[Event]) -> QuerySet[Event]:
    """``events`` restricted to those no reader can ever find an earlier one behind:
    below the visibility horizon, or written by the reader's own transaction.

    On PostgreSQL one condition in the same statement (the horizon is read with the
    rows, no extra round trip); on SQLite ``events`` unchanged.
    """
    if connections[events.db].vendor != "postgresql":
        return events
    return events.filter(RawSQL(_horizon_sql(), (), output_field=BooleanField()))


def _events() -> QuerySet[Event]:
    return Event.objects.using(router.db_for_read(Event))


def position_of(run_id: UUID, seq: int) -> Position:
    """The position of the run's event ``seq`` (its id); ``START`` for 0.

    Raises :class:`InvalidInput` naming ``after_seq`` when ``seq`` is no event of the run:
    a cursor is a position only within the history it came from.
    """
    if seq == 0:
        return START
    xid = _events().filter(run_id=run_id, pk=seq).values_list("xid", flat=True).first()
    if xid is None:
        raise InvalidInput(
            f"after_seq {seq} is not an event of run {run_id}: give the seq of the last "
            "event received, or 0 for the start",
            field="after_seq",
        )
    return Position(xid, seq)


def run_events_after(run_id: UUID, after: Position, limit: int) -> list[Event]:
    """Up to ``limit`` events of the run after ``after``, in commit order, each with
    its step's name (``step_name``)."""
    events = _events().filter(after.follows(), run_id=run_id).annotate(step_name=F("step__name"))
    return list(readable(events).order_by("xid", "id")[:limit])


def events_after(after: Position, limit: int, where: Q | None = None) -> list[Event]:
    """Up to ``limit`` events of any run after ``after`` (and matching ``where``), in
    commit order, each with its step's name (``step_name``). ``xid >= after.xid`` bounds
    the scan of the ``(xid, id)`` index, or of ``(type, xid, id)`` when ``where`` names
    types (a run's read leaves it out: the run's own index is the one)."""
    events = (
        _events()
        .filter(after.follows(), where or Q(), xid__gte=after.xid)
        .annotate(step_name=F("step__name"))
    )
    return list(readable(events).order_by("xid", "id")[:limit])


def encode_cursor(position: Position) -> str:
    """The opaque string of ``position``: what a consumer acknowledges."""
    return signing.Signer(salt=_CURSOR_SALT).sign(f"{position.xid}.{position.id}")


def decode_cursor(cursor: object) -> Position:
    """The position a cursor of :func:`encode_cursor` holds; :class:`InvalidInput`
    naming ``cursor`` for anything else (not a string, altered, made up)."""
    if not isinstance(cursor, str) or len(cursor) > 200:
        raise InvalidInput("cursor must be a cursor string as given with an event", field="cursor")
    try:
        xid, _, event_id = signing.Signer(salt=_CURSOR_SALT).unsign(cursor).partition(".")
        return Position(int(xid), int(event_id))
    except (signing.BadSignature, ValueError):
        raise InvalidInput(
            "cursor was not issued by this server (altered or made up): give one as "
            "received with an event",
            field="cursor",
        ) from None
