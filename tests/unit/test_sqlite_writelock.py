"""WriteLock on its own: one holder at a time, bounded waits, and a forked child that
neither shares nor releases its parent's lock."""

from __future__ import annotations

import itertools
import os
import sqlite3

import pytest

from workflows.backends.sqlite3 import writelock
from workflows.backends.sqlite3.writelock import WriteLock


def test_one_holder_at_a_time_and_a_bounded_wait(tmp_path):
    first = WriteLock(str(tmp_path / "db-writer.lock"), timeout=1.0)
    second = WriteLock(str(tmp_path / "db-writer.lock"), timeout=0.05)
    with first, pytest.raises(sqlite3.OperationalError, match="database is locked"):
        second.acquire()
    with second:
        assert second.held
    first.close()
    second.close()


@pytest.mark.processes
def test_a_forked_child_neither_shares_nor_releases_its_parents_lock(tmp_path):
    lock = WriteLock(str(tmp_path / "db-writer.lock"), timeout=0.05)
    lock.acquire()
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the parent's lock still excludes it
        lock.release()
        try:
            lock.acquire()
        except sqlite3.OperationalError:
            os._exit(0)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert lock.held
    lock.close()


def test_a_long_wait_polls_less_often_and_never_sleeps_past_the_timeout(tmp_path, monkeypatch):
    holder = WriteLock(str(tmp_path / "db-writer.lock"), timeout=1.0)
    waiter = WriteLock(str(tmp_path / "db-writer.lock"), timeout=0.013)
    pauses: list[float] = []
    clock = itertools.count()
    monkeypatch.setattr(writelock.time, "sleep", pauses.append)
    monkeypatch.setattr(writelock.time, "monotonic", lambda: next(clock) / 1000)  # 1 ms a read
    with holder, pytest.raises(sqlite3.OperationalError, match="database is locked"):
        waiter.acquire()
    # 0.1 ms doubling to the cap of 5 ms; then each pause only what was left.
    assert pauses == pytest.approx(
        [0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.005, 0.005, 0.004, 0.003, 0.002, 0.001]
    )
    waiter.close()
    holder.close()
