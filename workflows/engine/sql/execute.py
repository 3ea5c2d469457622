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
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX

Row = tuple[Any, ...]


@functools.lru_cache(maxsize=1024)
def to_qmark(sql: str) -> str:
    """``%s`` placeholders as SQLite's ``?``, the way Django's SQLite cursor rewrites them."""
    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")


def _direct(connection: BaseDatabaseWrapper) -> bool:
    """Whether a statement may bypass Django's cursor (see the module's docstring)."""
    return (
        connection.in_atomic_block
        and not connection.needs_rollback
        and not connection.execute_wrappers
        and not connection.queries_logged
    )


def _run(
    connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], fetch: Callable[[Any], Any]
) -> Any:
    if _direct(connection):
        with connection.wrap_database_errors:
            if connection.vendor == "sqlite":
                return fetch(connection.connection.execute(to_qmark(sql), params))
            with connection.connection.cursor() as cursor:
                cursor.execute(sql, params)
                return fetch(cursor)
    with connection.cursor() as cursor:
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
