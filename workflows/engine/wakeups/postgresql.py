"""Wake-ups across processes on PostgreSQL: ``NOTIFY`` in the transaction, one listener
thread per process.

A transition sends ``pg_notify('flowsite', topic)`` inside its transaction; PostgreSQL
delivers it to every listening session when (and only if) the transaction commits, and
merges identical notifications of one transaction. Events need no call at all: a trigger
on ``workflows_event`` (migration 0019) notifies ``events`` and ``run:<id>`` for the rows
each insert statement wrote.

The listener is a daemon thread with a psycopg connection of its own (never one of
Django's: those belong to their threads and sit in transactions). It is started by the
first :class:`~workflows.engine.wakeups.Watch` of a process, ``LISTEN``\\ s, and turns each
notification into :func:`~workflows.engine.wakeups.local.woken`. When its connection
fails (a restart, ``pg_terminate_backend``, a network cut) it reconnects with a growing
pause and then wakes every waiter (:func:`~workflows.engine.wakeups.local.woken_everything`):
what was notified while it was away is lost, so every waiter reads the database again.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import connections

from workflows.engine.wakeups.local import woken, woken_everything

logger = logging.getLogger("workflows.wakeups")

CHANNEL = "flowsite"
# How long the first watch of a process waits for the listener's LISTEN: a commit after
# it reaches the watch; past it the watch relies on its backstop read.
START_TIMEOUT = 5.0
# How often the listener looks whether it is asked to stop, between notifications.
STOP_CHECK = 0.5
# Pauses between reconnection attempts, growing to the longest (seconds).
RECONNECT_FIRST = 0.05
RECONNECT_LONGEST = 5.0


class Listener(threading.Thread):
    """The process's ``LISTEN`` connection for one database, feeding the local counters."""

    def __init__(self, database: Any, conninfo: dict[str, Any]) -> None:
        super().__init__(name="workflows-wakeups-listener", daemon=True)
        # psycopg (3), as Django's backend imported it: an optional dependency, so not here.
        self._database = database
        self._conninfo = conninfo
        self.listening = threading.Event()
        # The backend serving the LISTEN (a test terminates it); None while reconnecting.
        self.backend_pid: int | None = None
        self.connections_made = 0
        self._stopping = threading.Event()

    def stop(self) -> None:
        """Close the connection and end the thread (within :data:`STOP_CHECK`)."""
        self._stopping.set()
        self.join()

    def run(self) -> None:
        pause = RECONNECT_FIRST
        while not self._stopping.is_set():
            try:
                self._listen()
            except Exception as exc:
                logger.warning("wake-up listener lost its connection (%s); reconnecting", exc)
            self.backend_pid = None
            self.listening.clear()
            self._stopping.wait(pause)
            pause = min(pause * 2, RECONNECT_LONGEST)

    def _listen(self) -> None:
        with self._database.connect(**self._conninfo, autocommit=True) as connection:
            connection.execute(f"LISTEN {CHANNEL}")
            self.backend_pid = connection.info.backend_pid
            self.connections_made += 1
            self.listening.set()
            if self.connections_made > 1:
                woken_everything()
            while not self._stopping.is_set():
                for notification in connection.notifies(timeout=STOP_CHECK):
                    woken(notification.payload)


_listeners: dict[tuple[str, str], Listener] = {}
_starting = threading.Lock()


def _conninfo(alias: str) -> dict[str, Any]:
    """psycopg's connection arguments for ``alias``, as Django would connect."""
    params = connections[alias].get_connection_params()
    # Django's own hooks on its connections (adapters, cursors, a pool): none are needed.
    for name in ("context", "cursor_factory", "prepare_threshold", "pool"):
        params.pop(name, None)
    return params


def listener(alias: str) -> Listener:
    """The running listener of database ``alias`` in this process, started if need be.

    The call that starts it waits until it listens (at most :data:`START_TIMEOUT`); later
    calls do not wait, even while it reconnects (its waiters are all woken once it has).
    """
    key = (alias, str(connections[alias].settings_dict["NAME"]))
    with _starting:
        running = _listeners.get(key)
        started = running is None or not running.is_alive()
        if started:
            database = getattr(connections[alias], "Database")  # noqa: B009  # not typed on the base class
            running = _listeners[key] = Listener(database, _conninfo(alias))
            running.start()
    assert running is not None
    if started:
        running.listening.wait(START_TIMEOUT)
    return running


def stop_listeners() -> None:
    """Stop this process's listeners: before its test database is dropped, which a
    listening session would prevent. A later watch starts a new one."""
    with _starting:
        stopping = list(_listeners.values())
        _listeners.clear()
    for running in stopping:
        running.stop()
