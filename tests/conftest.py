"""Shared fixtures and hooks: the xdist groups (the tests that start processes; the long
test transactions and the consumers' waits), the wake-up listeners stopped before the
test database is dropped, concurrent calls, long polls without a backstop, definitions
taken out of the registry, a recording executor, and the reset of the shared test
handlers. The plain helpers the modules share (threads,
users, builders) are in ``tests/support/``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support import handlers
from tests.support.threads import run_concurrently
from workflows.definitions import Workflow, registry

PROCESS_DIRECTORIES = ("acceptance", "install")
PROCESS_MARKERS = ("acceptance", "processes")
# On PostgreSQL an event consumer reads only below the cluster's visibility horizon
# (workflows/queries/event_cursor.py), which a transaction open on any database of the
# server holds back. The tests that hold one for a minute or more (the ``slow`` ones, the
# model-based test: each runs in one test transaction) and the tests that wait on a
# consumer's cursor form one group, run one after another: a consumer's wait in one
# worker never outlasts its timeout behind another worker's long test transaction.
HORIZON_MODULES = (
    "tests/engine/model_based/",
    "tests/services/test_consumers.py",
    "tests/services/test_consumer_filters.py",
    "tests/api/test_events_api.py",
    "tests/api/test_consumers_api.py",
    "tests/api/test_long_poll_bound.py",
    "tests/api/test_long_poll_timed_out.py",
    "tests/engine/telemetry/test_live_contract.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test`` runs one worker per core), the tests that start
    real processes (markers ``acceptance`` and ``processes``) form one group that a single
    worker runs one after another: several worker clusters at once on a small machine
    would starve each other and turn their time bounds into noise. The other workers run
    the in-process tests beside them; so do the long test transactions and the consumers'
    waits (``HORIZON_MODULES``). ``trylast``: the directories' hooks mark first."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        path = str(item.path).replace(os.sep, "/")
        in_process_dirs = any(f"tests/{name}/" in path for name in PROCESS_DIRECTORIES)
        if in_process_dirs or any(item.get_closest_marker(name) for name in PROCESS_MARKERS):
            item.add_marker(pytest.mark.xdist_group("processes"))
        elif item.get_closest_marker("slow") or any(part in path for part in HORIZON_MODULES):
            item.add_marker(pytest.mark.xdist_group("event_horizon"))


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


@pytest.fixture
def no_backstop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long polls read again only when woken, within any wait a test makes: one that
    returns what it waited for was woken by the commit."""
    from workflows.queries import long_poll

    monkeypatch.setattr(long_poll, "BACKSTOP_SQLITE", 600.0)
    monkeypatch.setattr(long_poll, "BACKSTOP_POSTGRESQL", 600.0)


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
    """Every test starts with empty records in ``tests/support/handlers.py``."""
    handlers.reset()


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Record the spans Flowsite makes in this test (``tests/support/spans.py``): an SDK
    provider with the in-memory exporter, where ``workflows.tracing`` looks for one."""
    from opentelemetry import trace

    from tests.support.spans import SpanRecorder

    recorder = SpanRecorder()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: recorder.provider)
    return recorder
