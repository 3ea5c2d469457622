"""What consumers read: events after a position, as they are handed out, and how far
behind each consumer is.

An event handed to a consumer carries its ``cursor``, the opaque string of its position
in commit order (:func:`workflows.queries.event_cursor.encode_cursor`): acknowledging it
moves the consumer past this event and every one before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import router
from django.db.models import F, Func, OuterRef, Q, Subquery

from workflows.models import Event, EventConsumer
from workflows.queries.event_cursor import Position, encode_cursor, events_after

__all__ = [
    "ConsumedEvent",
    "ConsumerLag",
    "consumer_lag",
    "consumer_lags",
    "consumer_position",
    "next_events",
]


@dataclass(frozen=True)
class ConsumedEvent:
    """One event as a consumer receives it."""

    id: int
    cursor: str
    run_id: UUID | None
    step: str | None
    type: str
    payload: dict[str, Any]
    created_at: datetime

    @classmethod
    def of(cls, event: Event) -> ConsumedEvent:
        return cls(
            id=event.pk,
            cursor=encode_cursor(Position(event.xid, event.pk)),
            run_id=event.run_id,
            step=getattr(event, "step_name", None),
            type=event.type,
            payload=event.payload,
            created_at=event.created_at,
        )

    def as_dict(self) -> dict[str, Any]:
        """The event for JSON (the API), its run id a string."""
        return {
            "id": self.id,
            "cursor": self.cursor,
            "run": str(self.run_id) if self.run_id else None,
            "step": self.step,
            "type": self.type,
            "payload": self.payload,
            "created_at": self.created_at,
        }


def consumer_position(name: str) -> Position | None:
    """Consumer ``name``'s acknowledged position; ``None`` if it was never used."""
    row = (
        EventConsumer.objects.using(router.db_for_read(EventConsumer))
        .filter(name=name)
        .values_list("position_xid", "position_id")
        .first()
    )
    return None if row is None else Position(*row)


def next_events(position: Position, limit: int) -> list[ConsumedEvent]:
    """Up to ``limit`` events after ``position`` in commit order, as consumers get them."""
    return [ConsumedEvent.of(event) for event in events_after(position, limit)]


@dataclass(frozen=True)
class ConsumerLag:
    """A consumer, its position, and how many events wait for its acknowledgement."""

    name: str
    position: Position
    lag: int
    acked_at: datetime | None
    created_at: datetime


def consumer_lag(name: str) -> ConsumerLag | None:
    """Consumer ``name`` with its lag (as :func:`consumer_lags`); ``None`` if none."""
    found = consumer_lags(name=name)
    return found[0] if found else None


def consumer_lags(*, name: str | None = None) -> list[ConsumerLag]:
    """Every consumer by name (or the one named ``name``), with its lag: the events
    after its position, committed or not yet below the horizon. One statement (a
    correlated count per consumer over the ``(xid, id)`` index)."""
    alias = router.db_for_read(EventConsumer)
    behind = (
        Event.objects.using(alias)
        .filter(
            Q(xid__gt=OuterRef("position_xid"))
            | Q(xid=OuterRef("position_xid"), id__gt=OuterRef("position_id"))
        )
        .order_by()
        .annotate(count=Func(F("id"), function="COUNT"))
        .values("count")
    )
    consumers = EventConsumer.objects.using(alias)
    if name is not None:
        consumers = consumers.filter(name=name)
    rows = (
        consumers.annotate(lag=Subquery(behind))
        .order_by("name")
        .values_list("name", "position_xid", "position_id", "lag", "acked_at", "created_at")
    )
    return [
        ConsumerLag(consumer, Position(xid, event_id), lag or 0, acked_at, created_at)
        for consumer, xid, event_id, lag, acked_at, created_at in rows
    ]
