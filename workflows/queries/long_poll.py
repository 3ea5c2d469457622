"""Long polls: read until the database shows what a caller waits for, woken on commit.

Every blocking read of the project (``wait_for``, the API's ``?wait=S``, the event and
frame cursors) is the same loop, kept here once::

    run = long_poll(
        [f"run:{run_id}"],                     # the topics whose commits may change the answer
        lambda: get_run(run_id),               # the read, repeated
        until=lambda run: run.status in RUN_FINAL,
        timeout=30,
    )

:func:`long_poll` makes a :class:`~workflows.engine.wakeups.Watch` of the topics *before*
its first read (so a commit landing between the read and the wait still wakes it), reads,
and until ``until(value)`` holds or ``timeout`` seconds pass, waits for a wake-up and reads
again. It returns the last value read: the one that satisfied ``until``, or the current
state at the timeout; the caller decides whether a timeout is an error.

A wake-up is a hint: the loop also reads again every :func:`backstop_interval` seconds
without one (a lost ``NOTIFY``, a commit in another process on SQLite), so a missed
wake-up delays the answer and never loses it.

No transaction is held while waiting. Each read runs in autocommit and sees the latest
commits; called inside an ``atomic()`` block (a view under ``ATOMIC_REQUESTS`` that was not
marked non-atomic, see :mod:`workflows.api.long_poll`), it reads once and returns rather
than hold the transaction, and its locks and snapshot, for the whole wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from workflows.engine.sql.connection import engine_connection
from workflows.engine.wakeups import Watch

T = TypeVar("T")

# Seconds between reads when nobody woke the waiter. On PostgreSQL a notable commit
# (a run's end, a wait, a failure) reaches the waiter by NOTIFY, so the backstop covers a
# lost notification and routine step progress, which notifies nobody (its NOTIFY would
# cost the per-step path; see "Wake-ups on commit" in docs/architecture.md); on SQLite a
# commit in another process wakes nobody here, so it bounds that delay.
BACKSTOP_POSTGRESQL = 1.0
BACKSTOP_SQLITE = 0.2


def backstop_interval() -> float:
    """Seconds between two reads of a long poll that nobody woke (see the module)."""
    return BACKSTOP_POSTGRESQL if engine_connection().vendor == "postgresql" else BACKSTOP_SQLITE


def long_poll(
    topics: Iterable[str],
    read: Callable[[], T],
    *,
    until: Callable[[T], bool],
    timeout: float,
    backstop: float | None = None,
) -> T:
    """Read with ``read`` until ``until(value)`` or ``timeout`` seconds; the last value.

    Woken by a commit on any of ``topics`` (``run:<id>``, ``events``, ``frames:<step
    id>``, ...), and at least every ``backstop`` seconds (default
    :func:`backstop_interval`). A ``timeout`` of 0 reads once. Exceptions of ``read``
    propagate (a run that does not exist is not worth waiting for).
    """
    watch = Watch(topics)
    end = time.monotonic() + max(timeout, 0.0)
    value = read()
    if engine_connection().in_atomic_block:
        return value
    interval = backstop if backstop is not None else backstop_interval()
    while not until(value):
        left = end - time.monotonic()
        if left <= 0:
            break
        watch.wait(min(left, interval))
        value = read()
    return value
