"""Shared fixtures: thread helpers that fail instead of hanging, database vendor flags, staff
users, a recording executor, and the reset of the shared test handlers (`tests/handlers.py`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection, connections

from tests import handlers
from workflows.definitions import Workflow, registry

THREAD_TIMEOUT_SECONDS = 60
PROCESS_DIRECTORIES = ("acceptance", "install")
PROCESS_MARKERS = ("acceptance", "processes")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test`` runs one worker per core), the tests that start
    real processes (markers ``acceptance`` and ``processes``) form one group that a single
    worker runs one after another: several worker clusters at once on a small machine
    would starve each other and turn their time bounds into noise. The other workers run
    the in-process tests beside them. ``trylast``: the directories' hooks mark first."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        path = str(item.path).replace(os.sep, "/")
        in_process_dirs = any(f"tests/{name}/" in path for name in PROCESS_DIRECTORIES)
        if in_process_dirs or any(item.get_closest_marker(name) for name in PROCESS_MARKERS):
            item.add_marker(pytest.mark.xdist_group("processes"))


def run_concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Run each call in its own thread, released together by a barrier.

    Returns each call's result, or the exception it raised. Every thread closes its
    database connection so test databases can be torn down; a deadlock fails the test
    after ``THREAD_TIMEOUT_SECONDS`` instead of hanging it.
    """
    barrier = threading.Barrier(len(calls), timeout=THREAD_TIMEOUT_SECONDS)

    def wrapped(call: Callable[[], Any]) -> Any:
        try:
            barrier.wait()
            return call()
        except Exception as exc:
            return exc
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(wrapped, call) for call in calls]
        return [future.result(timeout=THREAD_TIMEOUT_SECONDS) for future in futures]


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's, and then: the wake-up listeners (PostgreSQL) stop before the test
    database is dropped, which their sessions would prevent."""
    from workflows.testing import stop_wakeup_listeners

    yield
    stop_wakeup_listeners()


@pytest.fixture
def concurrently() -> Callable[..., list[Any]]:
    return run_concurrently


def sweeper_until(done: Callable[[], bool], *, timeout: float = THREAD_TIMEOUT_SECONDS) -> None:
    """Run the sweeper in a thread (``workflows.testing.sweeper_running``) until
    ``done()`` (or ``timeout`` seconds), then stop it; fail if it does not stop. The
    thread closes its database connection so the test database can be dropped."""
    from workflows.testing import sweeper_running

    with sweeper_running():
        eventually(done, timeout=timeout)


def eventually(done: Callable[[], bool], *, timeout: float = THREAD_TIMEOUT_SECONDS) -> bool:
    """Whether ``done()`` became true within ``timeout`` seconds (looked at every 10 ms)."""
    give_up_at = time.monotonic() + timeout
    while not done():
        if time.monotonic() > give_up_at:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def no_backstop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long polls read again only when woken, within any wait a test makes: one that
    returns what it waited for was woken by the commit."""
    from workflows.queries import long_poll

    monkeypatch.setattr(long_poll, "BACKSTOP_SQLITE", 600.0)
    monkeypatch.setattr(long_poll, "BACKSTOP_POSTGRESQL", 600.0)


def once_watched(topic: str, verb: Callable[[], Any]) -> Any:
    """Call ``verb`` once a waiter of this process watches ``topic`` (a long poll
    watches before its first read, then waits)."""
    from workflows.engine.wakeups.local import watchers

    eventually(lambda: watchers(topic) > 0)
    return verb()


def is_sqlite() -> bool:
    return connection.vendor == "sqlite"


@pytest.fixture
def unregistered() -> Iterator[Callable[[type[Workflow]], None]]:
    """Take definitions out of the registry for one test, as a deploy that dropped them
    would; they are registered again afterwards."""
    taken: list[type[Workflow]] = []

    def unregister(workflow: type[Workflow]) -> None:
        registry.unregister(workflow.name, workflow.version)
        taken.append(workflow)

    yield unregister
    for workflow in taken:
        registry.register(workflow)


def staff(username: str, *permissions: str) -> User:
    """A staff user (password ``pw``) holding the given permission codenames."""
    user = User.objects.create_user(username, password="pw", is_staff=True)
    for codename in permissions:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return User.objects.get(pk=user.pk)  # fresh: no cached permissions


# What the recording executor was sent: (kind, unit id, route) units of ready work.
SENT_WORK: list[Any] = []


class RecordingExecutor:
    """An executor that keeps what it is sent (see the ``recording`` fixture)."""

    def enqueue(self, work: Any) -> None:
        SENT_WORK.extend(work)


@pytest.fixture
def recording(settings: Any) -> Iterator[list[Any]]:
    """Make ``WORKFLOWS["EXECUTOR"]`` a recorder and yield what it is sent."""
    settings.WORKFLOWS = {**settings.WORKFLOWS, "EXECUTOR": "tests.conftest.RecordingExecutor"}
    SENT_WORK.clear()
    yield SENT_WORK
    SENT_WORK.clear()


@pytest.fixture(autouse=True)
def _reset_shared_handlers() -> None:
    """Every test starts with empty records in ``tests.handlers``."""
    handlers.reset()
