"""Running the engine's hand-written statements, and adapting their parameters.

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
from uuid import UUID

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX

Row = tuple[Any, ...]
Adapter = Callable[[Any, BaseDatabaseWrapper], Any]


@functools.lru_cache(maxsize=1024)
def _qmark(sql: str) -> str:
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
                return fetch(connection.connection.execute(_qmark(sql), params))
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


def adapter(field: models.Field, connection: BaseDatabaseWrapper) -> Adapter:
    """A function ``(value, connection)`` giving the value the database stores for ``field``.

    The same value as ``field.get_db_prep_save(value, connection)``, without walking
    the field's chain of preparation methods for the plain values of the hot path:
    numbers and text are stored as they are, UUIDs as the backend stores them, JSON
    through the backend's own adaptation with the field's encoder. Anything else (an
    expression, a lazy string, a value of another type) takes Django's own path.
    """
    return field_adapter(field, connection.features.has_native_uuid_field)


@functools.cache
def field_adapter(field: models.Field, native_uuid: bool) -> Adapter:
    """:func:`adapter` for a backend that stores UUIDs natively, or as text."""
    if isinstance(field, models.ForeignKey):
        return field_adapter(field.target_field, native_uuid)  # stored as the key it points to
    django_path = field.get_db_prep_save
    if isinstance(field, models.JSONField):
        encoder = field.encoder

        def adapt_json(value: Any, connection: BaseDatabaseWrapper) -> Any:
            if value is None:
                return None  # SQL NULL, as Django stores None in a JSONField
            if not isinstance(value, _JSON_TYPES):
                return django_path(value, connection)
            return connection.ops.adapt_json_value(value, encoder)

        return adapt_json
    if isinstance(field, models.UUIDField):

        def adapt_uuid(value: Any, connection: BaseDatabaseWrapper) -> Any:
            if value is None:
                return None
            if type(value) is not UUID:
                return django_path(value, connection)
            return value if native_uuid else value.hex

        return adapt_uuid
    for field_type, value_type in _STORED_AS_IS:
        if isinstance(field, field_type):
            return _as_is(value_type, django_path)
    return _as_is((), django_path)


# Field types whose values of the given Python type Django stores unchanged.
_STORED_AS_IS: tuple[tuple[type[models.Field], type | tuple[type, ...]], ...] = (
    (models.BooleanField, bool),
    (models.IntegerField, int),
    (models.AutoField, int),
    (models.CharField, str),
    (models.TextField, str),
)
_JSON_TYPES = (dict, list, str, int, float, bool)


def _as_is(value_type: type | tuple[type, ...], django_path: Adapter) -> Adapter:
    """Values of ``value_type``, and ``None`` (SQL NULL for every field), as they are;
    anything else through Django's own path."""

    def adapt(value: Any, connection: BaseDatabaseWrapper) -> Any:
        if value is None or isinstance(value, value_type):
            return value
        return django_path(value, connection)

    return adapt
