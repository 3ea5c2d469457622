"""The engine follows the project's database router, and refuses databases it cannot use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from tests.support.database import is_sqlite
from workflows import checks

SCRIPT_TIMEOUT_SECONDS = 120


@pytest.mark.processes
def test_every_statement_of_a_run_follows_the_router(tmp_path: Path):
    """Hand-written SQL, ORM calls and the transaction all use the router's database.

    A run with a retry, a timer and three steps, in a project whose router sends every
    app to an alias other than ``default``: the run completes there, and the default
    database never gets the engine's tables.
    """
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update(DJANGO_SETTINGS_MODULE="tests.routing.settings", ROUTING_TEST_DIR=str(tmp_path))
    finished = subprocess.run(
        [sys.executable, "-m", "tests.routing.run_one"],
        cwd=django_settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_SECONDS,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert json.loads(finished.stdout.strip().splitlines()[-1]) == {
        "status": "completed",
        "default_has_workflows_tables": False,
        "primary_has_workflows_tables": True,
        "runs_in_primary": 1,
    }


def _ids(messages: list) -> list[str]:
    return [message.id for message in messages]


def test_an_sqlite_library_without_update_returning_is_refused(monkeypatch):
    assert "workflows.E010" not in _ids(checks.check_database_vendor())
    monkeypatch.setattr(checks, "sqlite_library_version", lambda: (3, 31, 1))
    found = checks.check_database_vendor()
    if is_sqlite():
        (error,) = (message for message in found if message.id == "workflows.E010")
        assert "SQLite 3.31.1 is too old" in error.msg and "3.35.0" in error.msg
    else:
        assert "workflows.E010" not in _ids(found)  # PostgreSQL needs no SQLite library


class ReadsFromAReplica:
    def db_for_read(self, model: type, **hints: object) -> str | None:
        return "replica" if model._meta.app_label == "workflows" else None


@pytest.mark.parametrize("routers", [[], [f"{__name__}.ReadsFromAReplica"]])
def test_reads_routed_away_from_writes_are_flagged(settings, routers):
    settings.DATABASE_ROUTERS = routers
    flagged = "workflows.W005" in _ids(checks.check_database_vendor())
    assert flagged == bool(routers)
