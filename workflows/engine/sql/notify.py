"""``NOTIFY`` in the transition's transaction (PostgreSQL): wake-ups delivered on commit."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.backends.base.base import BaseDatabaseWrapper

from workflows.engine.sql.execute import execute


def notify(connection: BaseDatabaseWrapper, channel: str, payloads: Sequence[str]) -> None:
    """Send each of ``payloads`` on ``channel`` in the connection's transaction, in one
    statement; PostgreSQL delivers them when (and only if) it commits."""
    execute(
        connection,
        "SELECT pg_notify(%s, payload) FROM unnest(%s::text[]) AS payload",
        [channel, list(payloads)],
    )
