"""WriteLock on its own: one holder at a time, bounded waits, and a forked child that
neither shares nor releases its parent's lock."""

from __future__ import annotations

import os
import sqlite3

import pytest

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
