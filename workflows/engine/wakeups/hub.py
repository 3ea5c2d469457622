"""The wake-up interface the engine and waiters use, on any database.

:func:`wake` is called inside a transition's transaction: its waiters in this process
are woken when the transaction commits (``on_commit``), and on PostgreSQL a ``NOTIFY``
in the same transaction wakes every other process's listener at the same moment. A
:class:`Watch` made in a process on PostgreSQL starts that process's listener first.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import partial
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.notify import notify
from workflows.engine.wakeups.local import LocalWatch, watching, woken
from workflows.engine.wakeups.postgresql import CHANNEL, listener


def wake(*topics: str) -> None:
    """Wake the waiters of ``topics`` once the current transaction commits (at once
    outside one); a rollback wakes nobody."""
    connection = engine_connection()
    if connection.vendor == "postgresql":
        notify(connection, CHANNEL, topics)
    transaction.on_commit(lambda: woken(*topics), using=connection.alias)


def events_written(run_ids: Iterable[UUID | None]) -> None:
    """Wake ``events`` and ``run:<id>`` of each run for the events a transition wrote.

    On PostgreSQL the trigger on the event table sends them (no statement here, no
    callback on the per-step path); elsewhere the waiters of this process are woken on
    commit.
    """
    connection = engine_connection()
    if connection.vendor != "postgresql":
        # The connection's own on_commit, which ``transaction.on_commit`` calls after
        # looking the connection up again by its alias: once per transition.
        connection.on_commit(partial(_wake_events, tuple(run_ids)))


def _wake_events(run_ids: tuple[UUID | None, ...]) -> None:
    """:func:`events_written`'s wake-up, at the commit: nothing at all when no watch of
    this process is open, which is every commit of a worker that serves no waiter.

    Decided at the commit, not when the events were written: a watch made in between
    reads the database before the commit shows the events, and must be woken. Its topics
    are named here, so a commit that wakes nobody formats no run id.
    """
    if watching():
        woken("events", *{f"run:{run_id}" for run_id in run_ids if run_id is not None})


def timer_armed(due_at: datetime) -> None:
    """Wake ``timers`` on commit when a timer was just armed due already (a retry without
    backoff, a sleep of zero), so a sweeper fires it then rather than at its next poll."""
    if due_at <= timezone.now():
        wake("timers")


class Watch(LocalWatch):
    """A waiter's view of some topics, taken before it reads the database.

    Make it BEFORE reading, then ``wait(timeout) -> bool`` (see
    :class:`~workflows.engine.wakeups.local.LocalWatch`). On PostgreSQL it also makes
    sure this process listens, so commits of other processes wake it.
    """

    def __init__(self, topics: Iterable[str]) -> None:
        connection = engine_connection()
        if connection.vendor == "postgresql":
            listener(connection.alias)
        super().__init__(topics)


def wait_for_wakeup(topics: Iterable[str], timeout: float) -> bool:
    """Block until one of ``topics`` is woken after this call, or ``timeout`` seconds
    pass (a :class:`Watch` made now); returns whether it was woken."""
    return Watch(topics).wait(timeout)
