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

A caller may say how to tell that nobody waits for the answer any more
(:func:`stopping_when`; the API passes a check of its client's socket): the loop asks it
before each wait and returns the last value read as soon as it says so, so a poll whose
client hung up holds its thread until its next wake-up or backstop, not its whole
``timeout``.

No transaction is held while waiting. Each read runs in autocommit and sees the latest
commits; called inside an ``atomic()`` block (a view under ``ATOMIC_REQUESTS`` that was not
marked non-atomic, see :mod:`workflows.api.long_poll`), it reads once and returns rather
than hold the transaction, and its locks and snapshot, for the whole wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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


# How the long polls of this context tell that nobody waits for them any more.
_abandoned: ContextVar[Callable[[], bool] | None] = ContextVar("long_poll_abandoned", default=None)


@contextmanager
def stopping_when(abandoned: Callable[[], bool] | None) -> Iterator[None]:
    """Within the block, a :func:`long_poll` stops waiting (returning its last read) as
    soon as ``abandoned()`` says true; it is asked before each wait. ``None``: never."""
    token = _abandoned.set(abandoned)
    try:
        yield
    finally:
        _abandoned.reset(token)


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
    propagate (a run that does not exist is not worth waiting for). Returns early when
    the caller's :func:`stopping_when` check says nobody waits any more.
    """
    watch = Watch(topics)
    end = time.monotonic() + max(timeout, 0.0)
    value = read()
    if engine_connection().in_atomic_block:
        return value
    interval = backstop if backstop is not None else backstop_interval()
    abandoned = _abandoned.get()
    while not until(value):
        left = end - time.monotonic()
        if left <= 0 or (abandoned is not None and abandoned()):
            break
        watch.wait(min(left, interval))
        value = read()
    return value
