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

Bound server-side, prepared once: on PostgreSQL through psycopg 3, when the project
allows prepared statements (Django's ``OPTIONS["prepare_threshold"]`` not ``None``;
Django's default is ``None``, as a transaction-pooling PgBouncer needs), the engine's
statements run on a server-binding cursor of the same DB-API connection, and psycopg
prepares each statement text once it has run ``prepare_threshold`` times on that
connection. Bound client-side, as Django binds, PostgreSQL parses and plans every
execution afresh, and for the engine's statements on the step table planning cost
more than running them (a claim's read: 0.43 ms against 0.03 prepared; the
data-modifying CTEs of :mod:`.locked_updates` and :mod:`.logged_updates` about
0.2 ms). Reads outside a transaction (a worker's look before it claims) take the same
cursor once Django's cursor has opened and checked the connection, unless a test or
``DEBUG`` watches the statements. Without the threshold every statement runs as
before.
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

try:
    import psycopg
except ImportError:  # SQLite only, or psycopg2: nothing is bound server-side
    psycopg = None  # type: ignore[assignment]

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


def _unwatched(connection: BaseDatabaseWrapper) -> bool:
    """Whether nothing must see this connection's statements on Django's cursor: its
    Django has what the direct path reads, and no test, ``DEBUG`` or
    ``execute_wrapper`` watches."""
    missing = _MISSING.get(type(connection))
    if missing is None:
        missing = direct_path_missing(connection)
    return not missing and not connection.execute_wrappers and not connection.queries_logged


def _direct(connection: BaseDatabaseWrapper) -> bool:
    """Whether a statement may bypass Django's cursor (see the module's docstring):
    :func:`_unwatched`, written out (every statement asks), and inside a transaction
    that may go on."""
    missing = _MISSING.get(type(connection))
    if missing is None:
        missing = direct_path_missing(connection)
    # On a Django lacking a read attribute, nothing else is read.
    return (
        not missing
        and not connection.execute_wrappers
        and not connection.queries_logged
        and connection.in_atomic_block
        and not connection.needs_rollback
    )


def _binds_server_side(raw: Any) -> bool:
    """Whether ``raw``, a DB-API connection, is psycopg 3's with prepared statements allowed."""
    return (
        psycopg is not None
        and isinstance(raw, psycopg.Connection)
        and raw.prepare_threshold is not None
    )


def _needs_djangos_cursor(connection: BaseDatabaseWrapper) -> bool:
    """Whether a statement off the direct path must run on Django's cursor. Only a
    statement outside a transaction on PostgreSQL, with prepared statements allowed and
    nothing watching, need not: on SQLite a write there takes the backend's write lock,
    and inside a transaction this path means one marked for rollback, which Django's
    cursor refuses."""
    return not (
        connection.vendor == "postgresql"
        and _unwatched(connection)
        and not connection.in_atomic_block
        and _binds_server_side(connection.connection)
    )


def _on_postgresql(raw: Any, sql: str, params: Sequence[Any], fetch: Callable[[Any], Any]) -> Any:
    cursor = psycopg.Cursor(raw) if _binds_server_side(raw) else raw.cursor()
    with cursor:
        cursor.execute(sql, params)
        return fetch(cursor)


def _run(
    connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], fetch: Callable[[Any], Any]
) -> Any:
    if _direct(connection):
        with connection.wrap_database_errors:
            if connection.vendor == "sqlite":
                return fetch(connection.connection.execute(to_qmark(sql), params))
            return _on_postgresql(connection.connection, sql, params, fetch)
    with connection.cursor() as cursor:
        if not _needs_djangos_cursor(connection):
            with connection.wrap_database_errors:
                return _on_postgresql(connection.connection, sql, params, fetch)
        cursor.execute(sql, params)
        return fetch(cursor)


def execute(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any]) -> int:
    """Run a statement; return how many rows it changed."""
    return _run(connection, sql, params, lambda cursor: cursor.rowcount)


def fetch_one(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any]) -> Row | None:
    """Run a statement; return its first row, or ``None``."""
    return _run(connection, sql, params, lambda cursor: cursor.fetchone())


def fetch_all(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any]) -> list[Row]:
    """Run a statement; return all its rows."""
    return _run(connection, sql, params, lambda cursor: cursor.fetchall())
