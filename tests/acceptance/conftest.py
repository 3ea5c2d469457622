"""Fixtures of the acceptance layer: real processes on pytest's own test database.

The processes get ``DATABASE_URL`` naming the test database that pytest-django created
(an SQLite file or a PostgreSQL database), so pytest sees everything they write. The
process fixture depends on ``transactional_db``: it is torn down first, so every
process is gone before pytest-django empties the tables.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.acceptance.harness import SUBPROCESS_SETTINGS, Processes, database_url, wait_for
from tests.acceptance.stack import Stack

# Inherited variables that would point the processes somewhere else.
_NOT_INHERITED = ("FLOWSITE_REDIS_URL", "FLOWSITE_EXECUTOR", "FLOWSITE_WORKERS", "Q_CLUSTER_NAME")


@pytest.fixture
def var_dir(tmp_path: Path) -> Path:
    """The processes' ``FLOWSITE_VAR_DIR``: release files for held handlers live here."""
    path = tmp_path / "var"
    path.mkdir()
    return path


@pytest.fixture
def processes(transactional_db: None, tmp_path: Path, var_dir: Path) -> Iterator[Processes]:
    env = {key: value for key, value in os.environ.items() if key not in _NOT_INHERITED}
    env.update(
        DJANGO_SETTINGS_MODULE=SUBPROCESS_SETTINGS,
        DATABASE_URL=database_url(connection.settings_dict),
        FLOWSITE_VAR_DIR=str(var_dir),
        FLOWSITE_Q_NAME=f"acceptance-{uuid.uuid4().hex[:12]}",
        PYTHONUNBUFFERED="1",
    )
    started = Processes(env, tmp_path / "logs")
    yield started
    started.stop_all()


@pytest.fixture
def stack(processes: Processes, var_dir: Path) -> Stack:
    return Stack(processes, var_dir)


def free_port() -> int:
    """A port nothing listens on now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server(processes: Processes) -> str:
    """The base URL of a running ``runserver`` (threaded: one thread and database
    connection per request) on the test database, with the test settings: the demo
    project's, which install ``rest_framework.authtoken``, and this app's workflows."""
    port = free_port()
    processes.start(
        "runserver",
        "runserver",
        "--noreload",
        f"127.0.0.1:{port}",
        env={"DJANGO_SETTINGS_MODULE": "tests.settings"},
    )

    def answers() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    wait_for(
        "the server to listen",
        answers,
        timeout=60,
        on_poll=processes.check_watched,
        describe=processes.logs,
    )
    return f"http://127.0.0.1:{port}"
