"""Running the engine's hand-written statements on the DB-API cursor.

Why not Django's cursor for every statement: a chained step runs five statements, and
on SQLite Django's per-statement wrapping (a new ``CursorWrapper``, the async-safety
and thread-sharing checks, the regular expression that rewrites ``%s`` to ``?``) cost
more CPU than SQLite spends executing them (``docs/benchmarks.md``). Inside a
transaction the connection is open and checked already, so the statement goes straight
to the DB-API connection, its ``%s`` placeholders rewritten once per statement text.

What Django's cursor gives and this keeps: database errors are raised as Django's
(``django.db.OperationalError`` and the rest), and a transaction marked for rollback
refuses further statements. What switches back to Django's cursor: ``DEBUG`` or a test
capturing queries (they must see every statement), an installed
``connection.execute_wrapper()``, and any statement outside a transaction.

The direct path reads attributes of Django's connection wrapper that are not public API
(:data:`DIRECT_PATH_ATTRIBUTES`), and on SQLite Django's own placeholder pattern. A Django
without one of them (a release Flowsite does not support yet) must not break statements:
:func:`direct_path_missing` names what is absent, decided once per wrapper class, and
then every statement goes through Django's cursor, correct but slower (system check
``workflows.W009`` says so).

Prepared statements (``prepared=True``): on PostgreSQL through psycopg 3, when the
project allows them (Django's ``OPTIONS["prepare_threshold"]`` not ``None``; Django's
default is ``None``, as a transaction-pooling PgBouncer needs), the statement is bound
server-side and prepared once per connection (``cursor.execute(…, prepare=True)`` on a
server-binding cursor of the same DB-API connection), so later executions skip
PostgreSQL's parsing and, once it settles on a generic plan, its planning. For the
engine's large statements (the data-modifying CTEs of :mod:`.locked_updates` and
:mod:`.logged_updates`), whose planning cost as much as the round trip they save. Only
on the direct path; everywhere else, and on SQLite, the same statement runs as any other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

try:
    from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX
except ImportError:  # gone from Django (or Python without sqlite3): see direct_path_missing
    FORMAT_QMARK_REGEX = None

Row = tuple[Any, ...]

# What the direct path reads of Django's connection wrapper. The first three and
# ``connection`` (the DB-API connection) are instance attributes set in its ``__init__``,
# ``queries_logged`` and ``wrap_database_errors`` properties of its class.
DIRECT_PATH_ATTRIBUTES = (
    "in_atomic_block",
    "needs_rollback",
    "execute_wrappers",
    "queries_logged",
    "wrap_database_errors",
    "connection",
)

# What each wrapper class lacks of the direct path's needs (direct_path_missing).
_MISSING: dict[type, tuple[str, ...]] = {}


def direct_path_missing(connection: BaseDatabaseWrapper) -> tuple[str, ...]:
    """What the direct path needs that this connection's Django lacks; empty when it may run.

    The names of :data:`DIRECT_PATH_ATTRIBUTES` missing from the wrapper, and
    ``FORMAT_QMARK_REGEX`` on SQLite when Django's placeholder pattern is gone (the
    rewrite to ``?`` must be Django's own). Decided once per wrapper class, whose
    ``__init__`` and properties give every instance the same attributes. Looked up on
    the class first, where a property is found without running it, then on the
    wrapper, where ``__init__`` put the rest (``django.db.connection``, a proxy,
    forwards that lookup to its wrapper): nothing here opens a database connection.
    """
    wrapper_class = type(connection)
    missing = _MISSING.get(wrapper_class)
    if missing is None:
        missing = tuple(
            name
            for name in DIRECT_PATH_ATTRIBUTES
            if not (hasattr(wrapper_class, name) or hasattr(connection, name))
        )
        if FORMAT_QMARK_REGEX is None and connection.vendor == "sqlite":
            missing += ("FORMAT_QMARK_REGEX",)
        _MISSING[wrapper_class] = missing
    return missing


@functools.lru_cache(maxsize=1024)
def to_qmark(sql: str) -> str:
    """``%s`` placeholders as SQLite's ``?``, the way Django's SQLite cursor rewrites them.

    Only on the direct path, which SQLite takes only with Django's pattern at hand.
    """
    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")


def _direct(connection: BaseDatabaseWrapper) -> bool:
    """Whether a statement may bypass Django's cursor (see the module's docstring)."""
    missing = _MISSING.get(type(connection))
    if missing is None:
        missing = direct_path_missing(connection)
    return (
        not missing
        and connection.in_atomic_block
        and not connection.needs_rollback
        and not connection.execute_wrappers
        and not connection.queries_logged
    )


def _server_cursor(connection: BaseDatabaseWrapper) -> Any:
    """A server-binding cursor of ``connection``'s DB-API connection, what a prepared
    statement runs on; ``None`` when it is not psycopg 3's (SQLite, psycopg2) or the
    project left prepared statements off (``prepare_threshold`` ``None``)."""
    if connection.vendor != "postgresql":
        return None
    try:
        import psycopg
    except ImportError:  # psycopg2: no prepared statements here
        return None
    raw = connection.connection
    if not isinstance(raw, psycopg.Connection) or raw.prepare_threshold is None:
        return None
    return psycopg.Cursor(raw)


def _run(
    connection: BaseDatabaseWrapper,
    sql: str,
    params: Sequence[Any],
    fetch: Callable[[Any], Any],
    prepared: bool = False,
) -> Any:
    if _direct(connection):
        with connection.wrap_database_errors:
            if connection.vendor == "sqlite":
                return fetch(connection.connection.execute(to_qmark(sql), params))
            server = _server_cursor(connection) if prepared else None
            if server is not None:
                with server:
                    server.execute(sql, params, prepare=True)
                    return fetch(server)
            with connection.connection.cursor() as cursor:
                cursor.execute(sql, params)
                return fetch(cursor)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return fetch(cursor)


def execute(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any]) -> int:
    """Run a statement; return how many rows it changed."""
    return _run(connection, sql, params, lambda cursor: cursor.rowcount)


def fetch_one(
    connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], *, prepared: bool = False
) -> Row | None:
    """Run a statement (``prepared``: see the module's docstring); return its first row,
    or ``None``."""
    return _run(connection, sql, params, lambda cursor: cursor.fetchone(), prepared)


def fetch_all(
    connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], *, prepared: bool = False
) -> list[Row]:
    """Run a statement (``prepared``: see the module's docstring); return all its rows."""
    return _run(connection, sql, params, lambda cursor: cursor.fetchall(), prepared)
