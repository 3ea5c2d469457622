"""The worker's watchdog: an attempt whose handler runs past its node's timeout fails with
class ``timeout`` while its worker is alive, instead of waiting for the lease scanner to
take it back as if the worker had died.

One daemon thread per process, started with the first attempt it watches, whatever the
number of worker threads: a lock-protected table of the attempts whose handlers are
running, each with its deadline, and a condition variable on which the thread sleeps
until the earliest one, or ``IDLE_WAKE`` at most; a watch wakes it only when its
deadline falls before that. Watching and unwatching cost a dictionary insert and
delete under the lock on the per-step path, no query and no thread; the thread only
touches the database when an attempt is due.

A deadline is a whole timeout (``node.effective_timeout``, the lease's length) after the
later of the handler's start and the lease's last renewal (``lease.renewed_at``, moved
on by each heartbeat), on this process's monotonic clock. When it passes while the
handler still runs, the watchdog records the attempt failed with
:class:`~workflows.engine.failures.AttemptTimedOut` through the ordinary fenced failure
transition (retried per the policy's ``retry_on``), so the handler's late heartbeat or
result is refused (``LeaseLost``, logged and recorded as ``lease.lost`` by the worker)
and the lease scanner, which waits ``RECLAIM_GRACE`` past the lease, finds nothing to
reclaim. A handler cannot be stopped from outside its thread: it runs on until it
returns or heartbeats.

Its write is ``quiet``: when it loses (the handler's outcome, a heartbeat, a reclaim or
a revoke came first) it writes nothing, not even ``lease.lost``: whoever won said what
happened. An attempt whose lease a heartbeat renewed meanwhile is watched on.

Only a handler that runs outside any transaction of its thread is watched: a
transactional node's handler runs inside the transaction that records its outcome, and
an inline run may sit inside a caller's (a test's) transaction. The watchdog's own
connection could neither see their uncommitted rows nor write without waiting for
their locks (on SQLite, the whole database), so one stalled handler would stall the
watch over every other attempt of the process. The runner judges those attempts when
their handler returns (:func:`overran`): a result after the deadline is refused as
``timeout`` there; one that never returns is left to the lease scanner
(``lease_expired``).

The thread uses its own database connection, closed after each round of expiries: it
holds none while it waits, so nothing lingers at exit or between rare timeouts.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import dataclass

from django.db import connections

from workflows.engine.failures import AttemptTimedOut
from workflows.engine.lease import Lease
from workflows.engine.outcomes import fail_attempt
from workflows.engine.sql.connection import engine_connection
from workflows.errors import LeaseLost

logger = logging.getLogger("workflows.watchdog")

# The longest the thread sleeps without looking at its table again (seconds).
IDLE_WAKE = 1.0


def deadline_of(lease: Lease, started: float) -> float:
    """When an attempt whose handler started at ``started`` (``time.monotonic()``) has
    run past its timeout: a whole timeout after its start or its last heartbeat."""
    return max(started, lease.renewed_at) + lease.node.effective_timeout.total_seconds()


def overran(lease: Lease, started: float) -> bool:
    """Whether the handler that started at ``started`` is past its deadline now."""
    return time.monotonic() > deadline_of(lease, started)


def timed_out(lease: Lease) -> AttemptTimedOut:
    """The error an attempt that ran past its timeout fails with."""
    seconds = lease.node.effective_timeout.total_seconds()
    return AttemptTimedOut(
        f"{lease.label} attempt {lease.attempt} ran past its timeout of {seconds:g}s "
        f"(worker {lease.owner!r})"
    )


@dataclass
class _Watched:
    lease: Lease
    started: float
    firing: bool = False

    @property
    def deadline(self) -> float:
        return deadline_of(self.lease, self.started)


class Watchdog:
    """The table of watched attempts and the thread that fails the ones past due."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watched: dict[int, _Watched] = {}
        # When the thread looks at its table next (-inf: awake, it looks again before
        # it sleeps); a watch with an earlier deadline wakes it.
        self._sleeps_until = -math.inf
        self._thread: threading.Thread | None = None

    def watch(self, lease: Lease) -> bool:
        """Watch ``lease``'s handler, which starts now; ``False`` (not watched) when the
        calling thread is inside a transaction (see the module docstring)."""
        if engine_connection().in_atomic_block:
            return False
        started = time.monotonic()
        entry = _Watched(lease, started)
        deadline = deadline_of(lease, started)
        with self._lock:
            self._watched[id(lease)] = entry
            if self._thread is None:
                self._start()
            elif deadline < self._sleeps_until:
                self._wake.notify()
        return True

    def unwatch(self, lease: Lease) -> None:
        """The handler of ``lease`` returned or raised: stop watching it."""
        with self._lock:
            self._watched.pop(id(lease), None)

    def watching(self) -> int:
        """How many attempts are watched now."""
        with self._lock:
            return len(self._watched)

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="workflows-watchdog", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            for entry in self._due():
                self._expire(entry)
            _close_connections()

    def _due(self) -> list[_Watched]:
        """Sleep until at least one watched attempt is past its deadline; return them
        marked as firing (they stay in the table: :meth:`unwatch` may still take them)."""
        with self._lock:
            while True:
                now = time.monotonic()
                due, next_deadline = [], math.inf
                for entry in self._watched.values():
                    if entry.firing:
                        continue
                    deadline = entry.deadline
                    if deadline <= now:
                        entry.firing = True
                        due.append(entry)
                    else:
                        next_deadline = min(next_deadline, deadline)
                if due:
                    self._sleeps_until = -math.inf
                    return due
                # Never asleep for longer than IDLE_WAKE: an attempt watched meanwhile
                # whose deadline lies beyond that (the usual case: minutes away) needs
                # no wake-up, so a busy worker does not wake this thread per attempt.
                self._sleeps_until = min(next_deadline, now + IDLE_WAKE)
                self._wake.wait(self._sleeps_until - now)

    def _expire(self, entry: _Watched) -> None:
        """Fail the attempt of ``entry`` with class ``timeout``, unless something came first."""
        lease = entry.lease
        try:
            status = fail_attempt(lease, timed_out(lease), quiet=True)
        except LeaseLost:
            status = None  # its outcome, a reclaim, a revoke or a heartbeat came first
        except Exception:
            status = None
            logger.exception("watchdog: recording the timeout of %s failed", lease.label)
        with self._lock:
            if status is None and entry.deadline > time.monotonic():
                entry.firing = False  # a heartbeat renewed the lease: watch on
                return
            if self._watched.get(id(lease)) is entry:
                del self._watched[id(lease)]
        if status is not None:
            logger.warning(
                "%s attempt %s ran past its timeout; recorded as timeout (%s)",
                lease.label,
                lease.attempt,
                status,
                extra={"run_id": str(lease.run_id), "step": lease.step_name},
            )


def _close_connections() -> None:
    """Close this thread's database connections: the watchdog holds none while it waits."""
    for connection in connections.all(initialized_only=True):
        connection.close()


_watchdog = Watchdog()


def watchdog() -> Watchdog:
    """This process's watchdog."""
    return _watchdog


def _forked() -> None:
    """A forked process (a django-q2 worker) inherits no thread: it watches afresh."""
    global _watchdog
    _watchdog = Watchdog()


os.register_at_fork(after_in_child=_forked)
