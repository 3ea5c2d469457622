"""A compare-and-set that also writes the transition's events, in one statement on PostgreSQL.

Why: on PostgreSQL each statement of a step costs a round trip and about 0.3 ms of CPU
(client and server, ``docs/benchmarks.md``), and a chained step's events were one
``INSERT`` of their own at the end of its transition. A data-modifying CTE lets the
transition's last ``UPDATE`` (the claim of the next step) carry them::

    WITH u AS (UPDATE … WHERE <expected state> RETURNING …),
         ev AS (INSERT INTO workflows_event …
                SELECT … FROM (VALUES <the events so far>) …
                UNION ALL SELECT <one event per row of u> FROM u
                ORDER BY ord)
    SELECT … FROM u

Same transaction, same rows: the events collected so far are inserted whether or not
the update matched, the event of a changed row only for a row it changed, in the order
they were recorded (the ``ORDER BY`` gives them their ids in that order), and the event
table's ``NOTIFY`` trigger fires for them as for any insert. SQLite has no
data-modifying CTE: there the update runs alone and the events stay with the
transition, which inserts them at its end as before.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from workflows.engine.sql.adapters import adapter
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import Row, fetch_all
from workflows.engine.sql.identifiers import column, table
from workflows.engine.sql.inserts import EventRow, event_params
from workflows.engine.sql.updates import cas_update_many, update_sql
from workflows.models import Event

# The event columns a carried insert writes, in the order of its rows' values.
_EVENT_FIELDS = ("run", "step", "type", "payload", "created_at", "published", "flow")


@dataclass(frozen=True)
class RowEvent:
    """The event of each row an update changes (``step.started`` of a claimed step).

    Of run ``run`` and of the changed row's step (its ``id``); its payload holds the
    row's ``from_row`` columns (their values after the update), then ``payload``.
    ``less``: (name, column) pairs, a ``from_row`` value less another column of the row
    (a step's ``attempt`` less ``round_attempts_before``: the attempt of its round).
    """

    run: UUID
    type: str
    payload: dict[str, Any]
    from_row: tuple[str, ...]
    less: tuple[tuple[str, str], ...] = ()

    def of(self, row: dict[str, Any]) -> EventRow:
        """The event of one changed row (by column name), as the transition records it."""
        values = {name: row[name] for name in self.from_row}
        for name, subtracted in self.less:
            values[name] -= row[subtracted]
        return EventRow(self.run, row["id"], self.type, {**values, **self.payload})


def cas_update_many_logged(
    model: type[models.Model],
    events: Sequence[EventRow],
    *,
    each: RowEvent,
    where: dict[str, Any],
    returning: Sequence[str],
    **changes: Any,
) -> tuple[list[Row], list[EventRow]]:
    """:func:`~.updates.cas_update_many`, and the events: ``events`` (those the
    transition recorded so far) and ``each``'s event of every row it changed.

    Returns the rows changed (their ``returning`` columns, which must include ``id``
    and ``each.from_row``) and the events still to insert: none on PostgreSQL, where
    this one statement inserted them; elsewhere ``events`` followed by the rows'
    events, for the transition's own insert at its end.
    """
    connection = engine_connection()
    if connection.vendor != "postgresql":
        rows = cas_update_many(model, where=where, returning=returning, **changes)
        named = [dict(zip(returning, row, strict=True)) for row in rows]
        return rows, [*events, *(each.of(row) for row in named)]
    assert "status" in where, "a set-based update must state the status it expects"
    update, update_params = update_sql(connection, model, where, changes)
    text = _logged_text(model, update, tuple(returning), len(events), each.from_row, each.less)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [*update_params, *event_params(events, now, connection, with_flow=True)]
    params += _row_event_params(each, now, connection)
    return fetch_all(connection, text, params), []


def _row_event_params(each: RowEvent, now: Any, connection: BaseDatabaseWrapper) -> list[Any]:
    run_key = adapter(Event._meta.get_field("run"), connection)
    payload = adapter(Event._meta.get_field("payload"), connection)
    return [
        run_key(each.run, connection),
        each.type,
        *each.from_row,
        payload(each.payload, connection),
        now,
    ]


@functools.lru_cache(maxsize=128)
def _logged_text(
    model: type[models.Model],
    update: str,
    returning: tuple[str, ...],
    recorded: int,
    from_row: tuple[str, ...],
    less: tuple[tuple[str, str], ...] = (),
) -> str:
    """The statement of :func:`cas_update_many_logged` on PostgreSQL.

    ``recorded``: how many events the transition recorded before; ``from_row``: the
    changed row's columns its event's payload takes (their names are parameters).
    Parameters: the update's, each recorded event's, then the row event's run, type,
    ``from_row`` names, payload and time.
    """
    connection = engine_connection()
    db_type = {name: _event_field(name).db_type(connection) for name in _EVENT_FIELDS}
    cast = {name: f"CAST(%s AS {db_type[name]})" for name in _EVENT_FIELDS}
    returned = ", ".join(column(model, name) for name in returning)
    # Each source row starts with its ordinal, which orders the inserts (and so the ids).
    recorded_rows = ", ".join(
        f"({ordinal}, {', '.join(cast[name] for name in _EVENT_FIELDS)})"
        for ordinal in range(recorded)
    )
    subtracted = dict(less)

    def value(name: str) -> str:
        if name in subtracted:
            return f"u.{column(model, name)} - u.{column(model, subtracted[name])}"
        return f"u.{column(model, name)}"

    from_row_json = ", ".join(f"CAST(%s AS text), {value(name)}" for name in from_row)
    row_events = (
        f"SELECT {recorded}, {cast['run']}, u.{column(model, 'id')}, {cast['type']}, "
        f"jsonb_build_object({from_row_json}) || {cast['payload']}, {cast['created_at']}, "
        f"FALSE, CAST(NULL AS {db_type['flow']}) FROM u"
    )
    source = (
        f"SELECT * FROM (VALUES {recorded_rows}) AS recorded UNION ALL {row_events}"
        if recorded
        else row_events
    )
    columns = ", ".join(column(Event, name) for name in _EVENT_FIELDS)
    values = ", ".join(f"e_{name}" for name in _EVENT_FIELDS)
    return (
        f"WITH u AS ({update} RETURNING {returned}), "
        f"ev AS (INSERT INTO {table(Event)} ({columns}) "
        f"SELECT {values} FROM ({source}) AS e (e_ordinal, {values}) "
        "ORDER BY e_ordinal, e_step) "
        f"SELECT {returned} FROM u"
    )


def _event_field(name: str) -> models.Field:
    field = Event._meta.get_field(name)
    assert isinstance(field, models.Field), f"Event.{name} has no column"
    return field
