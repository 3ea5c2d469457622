"""What the database stores for a value: per-field adapters of the statements' parameters.

Why not ``Field.get_db_prep_save`` for every value: walking a field's chain of
preparation methods cost more than executing the statement on SQLite. The plain values
of the hot path (numbers, text, UUIDs, JSON) are adapted by a function per field that
gives what Django gives; anything else still takes Django's own path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from workflows.models import Run

Adapter = Callable[[Any, BaseDatabaseWrapper], Any]


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


@functools.cache
def field_prep(model: type[models.Model], name: str, native_uuid: bool) -> Adapter:
    """How a value of ``model``'s field ``name`` is stored (:func:`field_adapter`)."""
    return field_adapter(model._meta.get_field(name), native_uuid)


def stored_run_id(run_id: UUID, connection: BaseDatabaseWrapper) -> Any:
    """A run's id as the database stores it, for the statements that look runs up."""
    return adapter(Run._meta.pk, connection)(run_id, connection)


def from_db_json(model: type[models.Model], name: str, value: Any, connection: Any) -> Any:
    """A JSON column's value as read from the database, decoded as the ORM decodes it."""
    field = model._meta.get_field(name)
    assert isinstance(field, models.JSONField), f"{model.__name__}.{name} is not a JSON column"
    # No expression outside a query: Django only asks whether it is a ``KeyTransform``.
    return field.from_db_value(value, None, connection)  # type: ignore[arg-type]  # stubs: required
