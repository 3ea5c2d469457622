"""What consumers read: events after a position, as they are handed out, and how far
behind each consumer is.

An event handed to a consumer carries its ``cursor``, the opaque string of its position
in commit order (:func:`workflows.queries.event_cursor.encode_cursor`): acknowledging it
moves the consumer past this event and every one before it.

A consumer created with a filter (:class:`EventFilter`) is handed only the events that
match it, and its lag counts only those. Acknowledging one of them moves the position
past every event before it, matching or not, so the events it never sees never hold it
back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import router
from django.db.models import (
    BooleanField,
    Case,
    CharField,
    F,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce

from workflows.engine.sql.json_arrays import array_rows
from workflows.models import Event, EventConsumer
from workflows.queries.event_cursor import Position, encode_cursor, events_after

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler, _AsSqlType

__all__ = [
    "EVERYTHING",
    "ConsumedEvent",
    "ConsumerLag",
    "EventFilter",
    "consumer_lag",
    "consumer_lags",
    "consumer_reading",
    "next_events",
]


@dataclass(frozen=True)
class EventFilter:
    """What a consumer reads: the events of runs of ``workflows`` (a schedule's event
    without a run, by the workflow it names) and of the types ``kinds``; an empty one
    does not narrow."""

    workflows: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()

    def matching(self) -> Q:
        """The condition an event must meet (``Q()``: every event)."""
        condition = Q()
        if self.kinds:
            condition &= Q(type__in=self.kinds)
        if self.workflows:
            condition &= Q(run__workflow_name__in=self.workflows) | Q(
                run__isnull=True, payload__workflow__in=self.workflows
            )
        return condition

    def __bool__(self) -> bool:
        return bool(self.workflows or self.kinds)

    def in_words(self) -> str:
        """What it lets through, as the console and the command say it."""
        parts = []
        if self.workflows:
            parts.append("workflows " + ", ".join(self.workflows))
        if self.kinds:
            parts.append("types " + ", ".join(self.kinds))
        return "; ".join(parts) or "everything"


EVERYTHING = EventFilter()


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


def consumer_reading(name: str) -> tuple[Position, EventFilter] | None:
    """Consumer ``name``'s acknowledged position and its filter; ``None`` if it was
    never used."""
    row = (
        EventConsumer.objects.using(router.db_for_read(EventConsumer))
        .filter(name=name)
        .values_list("position_xid", "position_id", "workflow_names", "event_types")
        .first()
    )
    if row is None:
        return None
    xid, event_id, workflow_names, event_types = row
    return Position(xid, event_id), EventFilter(tuple(workflow_names), tuple(event_types))


def consumer_position(name: str) -> Position | None:
    """Consumer ``name``'s acknowledged position; ``None`` if it was never used."""
    reading = consumer_reading(name)
    return None if reading is None else reading[0]


def next_events(
    position: Position, limit: int, event_filter: EventFilter = EVERYTHING
) -> list[ConsumedEvent]:
    """Up to ``limit`` events after ``position`` that match ``event_filter``, in commit
    order, as consumers get them."""
    events = events_after(position, limit, event_filter.matching())
    return [ConsumedEvent.of(event) for event in events]


@dataclass(frozen=True)
class ConsumerLag:
    """A consumer, its position, its filter, and how many events (of those it reads)
    wait for its acknowledgement."""

    name: str
    position: Position
    lag: int
    acked_at: datetime | None
    created_at: datetime
    event_filter: EventFilter = EVERYTHING


def consumer_lag(name: str) -> ConsumerLag | None:
    """Consumer ``name`` with its lag (as :func:`consumer_lags`); ``None`` if none."""
    found = consumer_lags(name=name)
    return found[0] if found else None


class _Admits(Func):
    """The JSON list ``listed`` is empty or holds ``value``: one condition of a
    consumer's filter, tested in the database over the list's rows
    (:mod:`workflows.engine.sql.json_arrays`), so every consumer's lag is one statement."""

    conditional = True
    output_field = BooleanField()

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> _AsSqlType:
        listed, listed_params = compiler.compile(self.source_expressions[0])
        value, value_params = compiler.compile(self.source_expressions[1])
        length = "jsonb_array_length" if connection.vendor == "postgresql" else "json_array_length"
        rows, rows_params = array_rows(listed, listed_params, connection.vendor)
        sql = (
            f"({length}({listed}) = 0"
            f" OR EXISTS (SELECT 1 FROM {rows} WHERE listed.value = {value}))"
        )
        return sql, (*listed_params, *rows_params, *value_params)


def consumer_lags(*, name: str | None = None, cap: int | None = None) -> list[ConsumerLag]:
    """Every consumer by name (or the one named ``name``), with its lag: the events
    after its position that it reads, committed or not yet below the horizon; with
    ``cap``, counted up to ``cap + 1`` only (a lag above ``cap`` reads ``cap + 1``), so
    that a consumer millions of events behind costs a bounded read (the console).

    One statement: a correlated count per consumer over the ``(xid, id)`` index, and
    for a filtered consumer a count that tests its filter on each event after its
    position (as :meth:`EventFilter.matching` does, by the event's workflow: its run's,
    or the one a schedule's event names).
    """
    alias = router.db_for_read(EventConsumer)
    after_position = Q(xid__gt=OuterRef("position_xid")) | Q(
        xid=OuterRef("position_xid"), id__gt=OuterRef("position_id")
    )
    behind = Event.objects.using(alias).filter(after_position)
    workflow = Coalesce(
        F("run__workflow_name"), KeyTextTransform("workflow", "payload"), output_field=CharField()
    )
    behind_filtered = behind.filter(
        _Admits(OuterRef("event_types"), F("type")),
        _Admits(OuterRef("workflow_names"), workflow),
    )
    consumers = EventConsumer.objects.using(alias)
    if name is not None:
        consumers = consumers.filter(name=name)
    lag = Case(
        When(Q(workflow_names=[], event_types=[]), then=_count_of(behind, cap)),
        default=_count_of(behind_filtered, cap),
    )
    rows = (
        consumers.annotate(lag=lag)
        .order_by("name")
        .values_list(
            "name",
            "position_xid",
            "position_id",
            "lag",
            "acked_at",
            "created_at",
            "workflow_names",
            "event_types",
        )
    )
    return [
        ConsumerLag(
            consumer,
            Position(xid, event_id),
            lag or 0,
            acked_at,
            created_at,
            EventFilter(tuple(workflow_names), tuple(event_types)),
        )
        for consumer, xid, event_id, lag, acked_at, created_at, workflow_names, event_types in rows
    ]


class _BoundedCount(Subquery):
    """The number of rows of a subquery (itself limited)."""

    template = "(SELECT COUNT(*) FROM (%(subquery)s) behind)"
    output_field = IntegerField()


def _count_of(events: QuerySet[Event], cap: int | None = None) -> Subquery:
    if cap is not None:
        return _BoundedCount(events.order_by().values("id")[: cap + 1])
    return Subquery(
        events.order_by().annotate(count=Func(F("id"), function="COUNT")).values("count")
    )
