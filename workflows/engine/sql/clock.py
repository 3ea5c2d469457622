"""Reading the database clock: a moment to store and compare later on that same clock."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import fetch_one
from workflows.engine.sql.expressions import db_now


def database_now() -> datetime:
    """The database clock, now, as an aware datetime.

    For a moment computed once and stored, then compared by every host with the same
    clock (a run's deadline: ``now + deadline``, fired by ``due_at <= now``). One
    statement; on SQLite the clock reads as text in UTC, on PostgreSQL as an aware value.
    """
    connection = engine_connection()
    sql, params = db_now().render(connection.vendor)
    row = fetch_one(connection, f"SELECT {sql}", params)
    assert row is not None
    return from_db_datetime(row[0])


def from_db_datetime(value: datetime | str) -> datetime:
    """A moment as a raw statement reads it (text or naive on SQLite), made aware (UTC)."""
    moment = parse_datetime(value) if isinstance(value, str) else value
    if moment is None:
        raise ValueError(f"not a moment: {value!r}")
    if settings.USE_TZ and timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)
    return moment
