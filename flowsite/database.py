"""Database settings for the demo project: embedded SQLite by default, any URL on demand.

SQLite is tuned for several processes (web, workers, scanners) sharing one file:

* WAL lets readers proceed while one writer commits.
* ``transaction_mode="IMMEDIATE"`` takes the write lock at ``BEGIN``; with the default
  DEFERRED mode a read-then-write transaction that meets another writer fails with
  "database is locked" at once, ignoring the busy timeout.
* The busy timeout makes a waiting writer queue instead of failing.
* The backend is ``workflows.backends.sqlite3``, Django's with one addition: writers
  (workers, django-q2's pusher and monitor, the sweeper, the web process) wait for one
  another on a file lock beside the database, so the next writer gets in as soon as the
  last commits, instead of SQLite's busy handler sleeping 1, 2, 5, 10 ms ... while the
  lock sits idle.
* ``synchronous=NORMAL`` is safe against application and process crashes in WAL mode
  (the database never corrupts, committed work survives a killed process); only an OS
  crash or power loss may lose the last few commits. Set
  ``FLOWSITE_SQLITE_SYNCHRONOUS=FULL`` to trade about half the write rate for
  durability across power loss.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

SQLITE_BUSY_TIMEOUT_SECONDS = 20

# psycopg's ``prepare_threshold`` on PostgreSQL unless the URL says otherwise. Set, the
# engine binds its statements server-side and psycopg prepares each once it has run this
# many times on a connection (a step then costs about a third less CPU:
# docs/benchmarks.md, "Folded statements, prepared"); Django's own queries stay
# unprepared (client-side binding). Django's default is
# ``None``, which a transaction-pooling PgBouncer older than 1.21 needs: such a URL
# says ``?prepare_threshold=none``.
PREPARE_THRESHOLD = 5

_URL_ENGINES = {
    "postgres": "django.db.backends.postgresql",
    "postgresql": "django.db.backends.postgresql",
    "sqlite": "workflows.backends.sqlite3",
}


def sqlite_database(path: Path) -> dict[str, Any]:
    """Return Django settings for an SQLite file configured for concurrent processes."""
    synchronous = os.environ.get("FLOWSITE_SQLITE_SYNCHRONOUS", "NORMAL").upper()
    if synchronous not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
        raise ValueError(f"FLOWSITE_SQLITE_SYNCHRONOUS={synchronous!r} is not an SQLite level")
    return {
        "ENGINE": "workflows.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": SQLITE_BUSY_TIMEOUT_SECONDS,
            "init_command": f"PRAGMA journal_mode=WAL;PRAGMA synchronous={synchronous};",
        },
        # Tests use a real file too, so WAL, locking and multi-process behaviour match
        # production (an in-memory database cannot be shared with another process).
        "TEST": {"NAME": str(path.with_name(f"test_{path.name}"))},
    }


def prepare_threshold(value: str) -> int | None:
    """psycopg's ``prepare_threshold`` as a ``DATABASE_URL`` gives it: a whole number of
    executions before a statement is prepared, or ``none`` (or nothing) for no prepared
    statements at all."""
    value = value.strip()
    if value.lower() in {"", "none"}:
        return None
    if not value.isdigit():
        raise ValueError(
            f"DATABASE_URL prepare_threshold={value!r} is neither a whole number nor 'none'"
        )
    return int(value)


def database_from_url(url: str) -> dict[str, Any]:
    """Translate a ``DATABASE_URL`` such as ``postgres://user@host:5432/name`` to settings."""
    parts = urlsplit(url)
    engine = _URL_ENGINES.get(parts.scheme)
    if engine is None:
        raise ValueError(
            f"DATABASE_URL scheme {parts.scheme!r} is not supported; "
            f"use one of {sorted(_URL_ENGINES)}"
        )
    name = unquote(parts.path[1:])  # sqlite:///relative.db, sqlite:////absolute.db
    if engine.endswith("sqlite3"):
        return sqlite_database(Path(name).resolve())
    if not name:
        raise ValueError("DATABASE_URL must name a database, e.g. postgres://127.0.0.1/app")
    options: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
    options["prepare_threshold"] = prepare_threshold(
        options.get("prepare_threshold", str(PREPARE_THRESHOLD))
    )
    return {
        "ENGINE": engine,
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
        # Workers and the sweeper query constantly: keep connections, check them first.
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
        # Lets concurrent suites on one server use separate test databases.
        "TEST": {"NAME": os.environ.get("DATABASE_TEST_NAME") or None},
    }
