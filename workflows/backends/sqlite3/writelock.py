"""An exclusive lock on a file beside an SQLite database, taken around every write.

SQLite lets one writer in at a time. A writer that finds the write lock taken does not
wait on it: SQLite's busy handler sleeps 1, 2, 5, 10, 15, 20, 25 ... ms and tries again,
and the lock stays idle from the moment its holder commits until a sleeper wakes.
Measured with two django-q2 workers, the pusher, the monitor and the sweeper writing one
file: a worker's ``BEGIN IMMEDIATE`` waited 1.5-2.4 ms on average for a transaction that
holds the lock about 0.5 ms, the pusher's claim 17 ms, the monitor's acknowledgement
10 ms (``docs/benchmarks.md``, "Workers"). Writers that take this lock first ask for it
again every :data:`POLL_SECONDS` (0.1 ms), so the next writer gets in within about that
long of a commit. A blocking ``flock``, woken by the kernel, measured no faster, and its
wait could not be bounded by the busy timeout.

``flock`` locks belong to an open file, so each connection opens its own (two threads of
one process exclude each other too, and a forked child reopens rather than share its
parent's), and the kernel drops the lock of a process that dies, however it dies. The
wait is bounded by the connection's busy timeout, like SQLite's own: past it the writer
gets "database is locked", which the engine's transitions retry.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time

# How often a waiting writer asks again. A chained step holds the lock about 0.5 ms and
# its worker needs a few hundred microseconds of Python before it asks again, so waiters
# poll well inside that gap.
POLL_SECONDS = 0.0001


class WriteLock:
    """The write lock of one connection: ``acquire`` before it writes, ``release`` after."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.held = False
        self._fd: int | None = None
        self._pid = 0

    def _file(self) -> int:
        if self._fd is None or self._pid != os.getpid():
            # A forked child must not share its parent's open file (and so its lock), nor
            # believe it holds what its parent held.
            self.held = False
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._pid = os.getpid()
        return self._fd

    def acquire(self) -> None:
        """Wait until this connection holds the lock, or raise "database is locked"."""
        if self.held and self._pid == os.getpid():
            return
        fd = self._file()
        give_up_at = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= give_up_at:
                    raise sqlite3.OperationalError("database is locked") from None
                time.sleep(POLL_SECONDS)
            else:
                self.held = True
                return

    def release(self) -> None:
        """Let the next writer in (nothing to do when not held)."""
        if self.held and self._fd is not None and self._pid == os.getpid():
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self.held = False

    def __enter__(self) -> WriteLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def close(self) -> None:
        """Release the lock and close the file (the connection is closing)."""
        self.release()
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = None
