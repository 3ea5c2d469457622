"""An exclusive lock on a file beside an SQLite database, taken around every write.

SQLite lets one writer in at a time. A writer that finds the write lock taken does not
wait on it: SQLite's busy handler sleeps 1, 2, 5, 10, 15, 20, 25 ... ms and tries again,
and the lock stays idle from the moment its holder commits until a sleeper wakes.
Measured with two django-q2 workers, the pusher, the monitor and the sweeper writing one
file: a worker's ``BEGIN IMMEDIATE`` waited 1.5-2.4 ms on average for a transaction that
holds the lock about 0.5 ms, the pusher's claim 17 ms, the monitor's acknowledgement
10 ms (``docs/benchmarks.md``, "Workers"). Writers that take this lock first ask for it
again after :data:`POLL_SECONDS` (0.1 ms), so the next writer gets in within about that
long of a short hold's commit. A blocking ``flock``, woken by the kernel, measured no
faster, and its wait could not be bounded by the busy timeout.

A writer still waiting after a few polls meets a holder that keeps the lock (a worker
chaining steps takes it again 0.1-0.15 ms after each commit): each further pause
doubles, up to :data:`MAX_POLL_SECONDS`. Polling every 0.1 ms all along, a second
worker woke about 15 times per wait, taking CPU from the holder on a small machine, and
once in it alternated with the first worker every few steps (each hand-over leaves the
lock idle until a poll, and starts a connection whose page cache the other's commits
made stale). Backing off lets the chaining worker run longer turns
(``docs/benchmarks.md``, "A second worker on SQLite").

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

# How soon a waiting writer first asks again: short holds (a claim, an acknowledgement,
# the end of a chained step's 0.5 ms) end within a few polls.
POLL_SECONDS = 0.0001
# The longest pause between two polls (reached at the seventh poll, after 6.3 ms of
# waiting): a writer gets in within about this long of the lock falling free, however
# long it has waited. 5 ms, not 2: two workers chaining no-op steps then took turns
# about half as often, and 2 workers ran at 0.95-0.97 of 1 worker's rate instead of
# 0.91 (docs/benchmarks.md, "A longer cap"); a web request only meets it after waiting
# more than 6 ms already.
MAX_POLL_SECONDS = 0.005


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
        pause = POLL_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                left = give_up_at - time.monotonic()
                if left <= 0:
                    raise sqlite3.OperationalError("database is locked") from None
                time.sleep(min(pause, left))
                pause = min(2 * pause, MAX_POLL_SECONDS)
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
