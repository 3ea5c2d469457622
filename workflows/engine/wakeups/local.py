"""Wake-ups within one process: a condition variable and a counter per topic.

On SQLite this is the whole mechanism (a waiter in another process finds the work at
its next short poll); on PostgreSQL the listener feeds the same counters from
``NOTIFY`` (:mod:`workflows.engine.wakeups.postgresql`).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable

from django.db import transaction

from workflows.engine.sql.connection import engine_alias

_changed = threading.Condition()
# How many times each topic was woken in this process; a waiter compares before and after.
_woken: defaultdict[str, int] = defaultdict(int)


def wake(topic: str) -> None:
    """Wake the waiters of ``topic`` once the current transaction commits (at once
    outside one)."""
    transaction.on_commit(lambda: woken(topic), using=engine_alias())


def woken(*topics: str) -> None:
    """Record that ``topics`` happened (committed) and wake this process's waiters."""
    with _changed:
        for topic in topics:
            _woken[topic] += 1
        _changed.notify_all()


class Watch:
    """A waiter's view of some topics, taken before it reads the database.

    ``wait`` returns as soon as a topic was woken since the watch was made (or since the
    previous ``wait`` returned), so a wake-up that lands between the waiter's read and
    its wait is not missed: make the watch, read, then wait, and read again.
    """

    def __init__(self, topics: Iterable[str]) -> None:
        self.topics = tuple(topics)
        with _changed:
            self._seen = [_woken[topic] for topic in self.topics]

    def _counts(self) -> list[int]:
        return [_woken[topic] for topic in self.topics]

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


def wait_for_wakeup(topics: Iterable[str], timeout: float) -> bool:
    """Block until one of ``topics`` is woken after this call, or ``timeout`` seconds
    pass (a :class:`Watch` made now); returns whether it was woken."""
    return Watch(topics).wait(timeout)
