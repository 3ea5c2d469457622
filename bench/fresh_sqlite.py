"""What every inline benchmark shares: a fresh SQLite database set up like the demo's,
the facts about it that a figure is meaningless without, and the printed table."""

from __future__ import annotations

import os
import platform
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def measured_in_fresh_sqlite(
    synchronous: str | None, measure: Callable[[], T]
) -> tuple[T, dict[str, str]]:
    """Run ``measure`` against a fresh temporary SQLite database; return its figures and
    the database's facts. The database is deleted afterwards."""
    with tempfile.TemporaryDirectory(prefix="flowsite-bench-") as tmp:
        configure_django(Path(tmp), synchronous)
        from django.db import connections

        try:
            return measure(), sqlite_facts()
        finally:
            connections.close_all()


def configure_django(var_dir: Path, synchronous: str | None, database_url: str = "") -> None:
    """Point the demo settings at a fresh SQLite file in ``var_dir`` (or at the empty
    database ``database_url`` names, for a benchmark that made one), then set Django up
    and migrate."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "flowsite.settings"
    os.environ["FLOWSITE_VAR_DIR"] = str(var_dir)
    os.environ["FLOWSITE_EXECUTOR"] = "inline"
    # DEBUG records every query in connection.queries, which would slow both sides.
    os.environ["DJANGO_DEBUG"] = "0"
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    if synchronous is not None:
        os.environ["FLOWSITE_SQLITE_SYNCHRONOUS"] = synchronous

    import django
    from django.conf import settings

    from flowsite.database import sqlite_database

    expected = sqlite_database(var_dir / "flowsite.sqlite3")
    if not database_url and settings.DATABASES["default"] != expected:
        raise RuntimeError(f"settings did not pick the benchmark database: {expected['NAME']}")
    django.setup()

    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def sqlite_facts() -> dict[str, str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("select sqlite_version()")
        version = cursor.fetchone()[0]
        cursor.execute("pragma synchronous")
        level = cursor.fetchone()[0]
        cursor.execute("pragma journal_mode")
        journal = cursor.fetchone()[0]
    return {
        "version": version,
        "synchronous": f"{SYNCHRONOUS_NAMES.get(level, '?')} ({level})",
        "journal_mode": journal,
        "transaction_mode": str(connection.settings_dict["OPTIONS"].get("transaction_mode")),
        "path": str(connection.settings_dict["NAME"]),
    }


def print_header(title: str, facts: dict[str, str]) -> None:
    """The benchmark's name and the machine and database its figures come from."""
    import django

    print(title)
    print(f"  SQLite {facts['version']}, journal_mode={facts['journal_mode']}, ", end="")
    print(f"synchronous={facts['synchronous']}, transaction_mode={facts['transaction_mode']}")
    print(f"  Python {platform.python_version()}, Django {django.get_version()}, ", end="")
    print(f"{os.cpu_count()} CPUs, {platform.platform()}")
    print(f"  database: fresh file {facts['path']}")


def print_table(rows: Sequence[tuple[str, str]]) -> None:
    width = max(len(name) for name, _ in rows)
    print()
    print(f"  {'measure'.ljust(width)}  {'value':>10}")
    print(f"  {'-' * width}  {'-' * 10}")
    for name, value in rows:
        print(f"  {name.ljust(width)}  {value:>10}")
    print()
