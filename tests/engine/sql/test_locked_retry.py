"""A transition meets "database is locked" as a user meets it: another connection holds
SQLite's write lock (a thread of this process on the file lock beside the database, or
another process on SQLite's own lock). The transition waits out its busy timeout, retries
with jittered, doubling backoff, and succeeds once the lock is released; held past its
bound, it gives up with ``DatabaseBusy`` (a refusal every surface shows: exit status 1
from a command) and leaves nothing half written."""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from io import StringIO

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection, connections, transaction

import workflows
from tests.support.handlers import WORK
from workflows import DatabaseBusy, Task, Workflow
from workflows.engine import transaction as engine_transaction
from workflows.models import Run

pytestmark = [
    pytest.mark.skipif(
        django_settings.DATABASES["default"]["ENGINE"] != "workflows.backends.sqlite3",
        reason='"database is locked" is SQLite\'s',
    ),
    pytest.mark.django_db(transaction=True),
]

BUSY_TIMEOUT = 0.2
BASE_DELAY = 0.05
ATTEMPTS = 4
HOLDER_TIMEOUT = 30.0


class Single(Workflow):
    name = "locked_retry_single"
    only = Task(WORK)


@pytest.fixture
def short_waits(settings, monkeypatch) -> Iterator[list[tuple[float, float]]]:
    """A busy timeout of 0.2 s (20 s in the project) and a few quick retries; yields the
    (low, high) bounds of every jittered delay drawn."""
    settings.WORKFLOWS = {
        **settings.WORKFLOWS,
        "LOCKED_RETRY_ATTEMPTS": ATTEMPTS,
        "LOCKED_RETRY_BASE_DELAY": BASE_DELAY,
    }
    connection.close()  # the busy timeout is read when a connection opens
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", BUSY_TIMEOUT)
    drawn: list[tuple[float, float]] = []
    uniform = engine_transaction.random.uniform

    def recorded(low: float, high: float) -> float:
        drawn.append((low, high))
        return uniform(low, high)

    monkeypatch.setattr(engine_transaction.random, "uniform", recorded)
    yield drawn
    connection.close()


@contextlib.contextmanager
def thread_holding_the_lock() -> Iterator[threading.Event]:
    """Another connection of this process in a write transaction (the file lock)."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                taken.set()
                release.wait(HOLDER_TIMEOUT)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert taken.wait(10), "the holder did not get the write lock"
    try:
        yield release
    finally:
        release.set()
        holder.join(10)


HOLD_IN_SQLITE = (
    "import sqlite3, sys\n"
    "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "db.execute('BEGIN IMMEDIATE')\n"
    "print('held', flush=True)\n"
    "sys.stdin.readline()\n"
    "db.execute('COMMIT')\n"
)


@contextlib.contextmanager
def process_holding_the_lock() -> Iterator[threading.Event]:
    """Another process in a write transaction of plain sqlite3 (SQLite's own lock, not
    the file lock), as a `sqlite3` shell or a script on the same file would be."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_IN_SQLITE, connection.settings_dict["NAME"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    release = threading.Event()

    def release_when_told() -> None:
        release.wait(HOLDER_TIMEOUT)
        with contextlib.suppress(BrokenPipeError, ValueError):
            holder.stdin.write("\n")
            holder.stdin.flush()

    try:
        assert holder.stdout.readline().strip() == "held"
        threading.Thread(target=release_when_told, daemon=True).start()
        yield release
    finally:
        release.set()
        holder.wait(10)
        holder.stdin.close()
        holder.stdout.close()


HOLDERS: dict[str, Callable[[], contextlib.AbstractContextManager[threading.Event]]] = {
    "thread on the file lock": thread_holding_the_lock,
    "process on sqlite's lock": process_holding_the_lock,
}


# The holder in another process is marked so: make test-fast leaves it out.
HOLDER_PARAMS = [
    pytest.param("thread on the file lock"),
    pytest.param("process on sqlite's lock", marks=pytest.mark.processes),
]


def retries_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The retry warnings, without the name of the transition (an engine internal)."""
    return [
        re.sub(r" in \w+;", " in T;", record.getMessage())
        for record in caplog.records
        if record.name == "workflows.engine" and "database is locked" in record.getMessage()
    ]


@pytest.mark.parametrize("holder", HOLDER_PARAMS)
def test_a_transition_retries_with_jitter_and_succeeds_once_the_lock_is_released(
    holder, short_waits, caplog
):
    caplog.set_level(logging.WARNING, logger="workflows.engine")
    with HOLDERS[holder]() as release:
        # Released after the first busy timeout and retry, before the bound.
        threading.Timer(BUSY_TIMEOUT * 1.5, release.set).start()
        run = workflows.start_run(Single)

    assert Run.objects.filter(pk=run.pk, status="running").exists()
    retries = retries_logged(caplog)
    assert retries, "the transition got the lock at once: nothing was retried"
    assert retries[0] == "database is locked in T; retry 1"
    # Each delay is drawn between 0 and a bound that doubles with each retry.
    assert short_waits == [(0, BASE_DELAY * 2**n) for n in range(len(retries))]


@pytest.mark.parametrize("holder", HOLDER_PARAMS)
def test_a_transition_gives_up_after_its_bound_saying_the_database_is_busy(
    holder, short_waits, caplog
):
    caplog.set_level(logging.WARNING, logger="workflows.engine")
    with HOLDERS[holder](), pytest.raises(DatabaseBusy) as busy:
        workflows.start_run(Single)
    assert f"locked by other writers through {ATTEMPTS} attempts" in busy.value.message
    assert isinstance(busy.value.__cause__, OperationalError)
    assert "database is locked" in str(busy.value.__cause__)

    assert not Run.objects.exists()  # nothing half written
    assert retries_logged(caplog) == [
        f"database is locked in T; retry {n}" for n in range(1, ATTEMPTS)
    ]
    assert len(short_waits) == ATTEMPTS - 1  # no wait after the last attempt


def test_a_command_that_meets_a_busy_database_exits_1_saying_so(short_waits):
    run = workflows.start_run(Single)
    with thread_holding_the_lock(), pytest.raises(CommandError, match="stayed locked"):
        call_command("workflows_cancel", str(run.pk), stdout=StringIO())
    assert Run.objects.get(pk=run.pk).status == "running"
