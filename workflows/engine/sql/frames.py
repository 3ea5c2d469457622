"""The insert of a telemetry flush's log frames: one statement with a fixed number of
parameters, whatever the number of frames.

A multi-row ``VALUES`` list (:func:`~workflows.engine.sql.inserts.insert_rows`) costs
six parameters a frame: a flush of 1,000 lines took 45 ms on PostgreSQL, most of it
psycopg splitting and the server parsing a 6,000-parameter statement, and SQLite
refuses statements past 32,766 parameters, which a flush of 10,000 frames would pass.
So the frames travel as columns: PostgreSQL arrays unnested ``WITH ORDINALITY``, or
one JSON array walked by SQLite's ``json_each``; the database numbers them from
``first_seq``, in order.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import UTC, datetime

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import execute
from workflows.engine.sql.identifiers import column, table
from workflows.models import Frame

# One frame to insert: (stream, text, at as seconds since the epoch).
FrameValues = tuple[str, str, float]


def insert_frames(
    step_id: int, attempt: int, first_seq: int, frames: Sequence[FrameValues]
) -> None:
    """Insert ``frames`` of ``step_id``'s ``attempt``, numbered from ``first_seq``."""
    if not frames:
        return
    connection = engine_connection()
    if connection.vendor == "postgresql":
        streams, texts, times = (list(values) for values in zip(*frames, strict=True))
        params = [step_id, first_seq, attempt, streams, texts, times]
    else:
        stored = [(stream, text, _sqlite_datetime(at)) for stream, text, at in frames]
        params = [step_id, first_seq, attempt, json.dumps(stored)]
    execute(connection, _insert_text(connection.vendor), params)


@functools.cache
def _insert_text(vendor: str) -> str:
    columns = ", ".join(
        column(Frame, name) for name in ("step", "seq", "attempt", "stream", "text", "at")
    )
    if vendor == "postgresql":
        source = (
            "SELECT %s, %s + frame.n - 1, %s, frame.stream, frame.text, to_timestamp(frame.at) "
            "FROM unnest(%s::text[], %s::text[], %s::float8[]) "
            "WITH ORDINALITY AS frame (stream, text, at, n)"
        )
    else:
        source = (
            "SELECT %s, %s + frame.key, %s, json_extract(frame.value, '$[0]'), "
            "json_extract(frame.value, '$[1]'), json_extract(frame.value, '$[2]') "
            "FROM json_each(%s) AS frame"
        )
    return f"INSERT INTO {table(Frame)} ({columns}) {source}"


def _sqlite_datetime(at: float) -> str:
    """``at`` (seconds since the epoch) as Django stores a datetime on SQLite: UTC, to the
    microsecond, as events' ``created_at`` is. SQLite's own ``STRFTIME(..., 'unixepoch')``
    rounds to the millisecond, which could date a line logged just before a step
    completed after the completion's event, and a tail would print them out of order."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
