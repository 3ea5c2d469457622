"""Wake-ups within one process: a condition variable and a counter per topic.

On SQLite this is the whole mechanism (a waiter in another process finds the work at
its next short poll); on PostgreSQL the listener feeds the same counters from
``NOTIFY`` (:mod:`workflows.engine.wakeups.postgresql`).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterable

_changed = threading.Condition()
# How many times each watched topic was woken in this process; a waiter compares before
# and after. Only topics some live watch holds are counted (``_watchers``), so a
# process that commits events of a million runs keeps no counter for each.
_woken: dict[str, int] = {}
_watchers: Counter[str] = Counter()
# Bumped when wake-ups may have been lost (the listener reconnected): wakes every waiter.
_everything = 0


def woken(*topics: str) -> None:
    """Record that ``topics`` happened (committed) and wake this process's waiters."""
    with _changed:
        for topic in topics:
            if topic in _woken:
                _woken[topic] += 1
        _changed.notify_all()


def woken_everything() -> None:
    """Wake every waiter of every topic: wake-ups may have been lost, so each waiter
    reads the database again (the listener calls it after a reconnection)."""
    global _everything
    with _changed:
        _everything += 1
        _changed.notify_all()


def watching() -> bool:
    """Whether any watch of this process is open. Read without the lock: a watch counts
    itself in before its waiter reads the database, so a commit whose wake-up reads
    this after the commit either sees that watch or precedes a read that shows it."""
    return bool(_watchers)


def watchers(topic: str) -> int:
    """How many live watches of this process hold ``topic`` (for a test or a metric)."""
    with _changed:
        return _watchers[topic]


def _unwatch(topics: tuple[str, ...]) -> None:
    """Forget the counters of topics no live watch holds any more."""
    with _changed:
        for topic in topics:
            _watchers[topic] -= 1
            if _watchers[topic] <= 0:
                del _watchers[topic]
                del _woken[topic]


class LocalWatch:
    """A waiter's view of some topics in this process, taken before it reads the database.

    ``wait`` returns as soon as a topic was woken since the watch was made (or since the
    previous ``wait`` returned), so a wake-up that lands between the waiter's read and
    its wait is not missed: make the watch, read, then wait, and read again.
    """

    def __init__(self, topics: Iterable[str]) -> None:
        self.topics = tuple(topics)
        with _changed:
            for topic in self.topics:
                _watchers[topic] += 1
                _woken.setdefault(topic, 0)
            self._seen = self._counts()
        weakref.finalize(self, _unwatch, self.topics)

    def _counts(self) -> list[int]:
        return [_everything, *(_woken[topic] for topic in self.topics)]

    def wait(self, timeout: float) -> bool:
        """Block until one of the topics is woken, or ``timeout`` seconds pass; returns
        whether it was woken."""
        end = time.monotonic() + timeout
        with _changed:
            while True:
                counts = self._counts()
                if counts != self._seen:
                    self._seen = counts
                    return True
                left = end - time.monotonic()
                if left <= 0:
                    return False
                _changed.wait(left)
