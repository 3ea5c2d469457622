"""System checks: refuse invalid definitions and unsafe configuration before they run."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from workflows.conf import workflow_settings
from workflows.definitions import registry


@checks.register("workflows")
def check_definitions(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """workflows.E001: every registered workflow must still validate (handlers import)."""
    return [
        checks.Error(problem, obj=workflow, id="workflows.E001")
        for workflow in registry.all()
        for problem in workflow.problems()
    ]


@checks.register("workflows")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """workflows.E002: the WORKFLOWS setting must hold known keys and a loadable executor."""
    from workflows.executors import get_executor

    try:
        workflow_settings.reload()
        get_executor()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="workflows.E002")]
    return []


@checks.register("workflows", checks.Tags.database)
def check_sqlite(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """workflows.W001 to W003: SQLite must be set up for processes sharing one file."""
    return [
        message
        for alias, database in settings.DATABASES.items()
        for message in sqlite_problems(alias, database)
    ]


def sqlite_problems(alias: str, database: dict[str, Any]) -> list[checks.CheckMessage]:
    """Return the warnings for one database's settings (none unless it is SQLite)."""
    if not database.get("ENGINE", "").endswith("sqlite3"):
        return []
    found: list[checks.CheckMessage] = []
    options = database.get("OPTIONS", {})
    if str(options.get("transaction_mode", "")).upper() != "IMMEDIATE":
        found.append(
            checks.Warning(
                f"database {alias!r}: SQLite without transaction_mode='IMMEDIATE' fails "
                "read-then-write transitions with 'database is locked' under concurrency",
                hint="Set OPTIONS['transaction_mode'] = 'IMMEDIATE'.",
                id="workflows.W001",
            )
        )
    if "journal_mode=wal" not in str(options.get("init_command", "")).lower():
        found.append(
            checks.Warning(
                f"database {alias!r}: SQLite without WAL blocks readers while a worker writes",
                hint="Add 'PRAGMA journal_mode=WAL;' to OPTIONS['init_command'].",
                id="workflows.W002",
            )
        )
    if not options.get("timeout"):
        found.append(
            checks.Warning(
                f"database {alias!r}: SQLite without a busy timeout fails at once when "
                "another process holds the write lock",
                hint="Set OPTIONS['timeout'] (seconds), e.g. 20.",
                id="workflows.W003",
            )
        )
    return found
