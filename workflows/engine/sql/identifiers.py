"""The only way a table or column name enters the engine's SQL text.

The names come from the closed set the app's migrations create: a model of this app
(``app_label == "workflows"``) and one of its concrete fields. A name from anywhere
else (a caller's string, another app's model) raises instead of being quoted, so no
data ever reaches SQL text as an identifier.
"""

from __future__ import annotations

import functools

from django.db import models

APP_LABEL = "workflows"


def _quoted(name: str) -> str:
    """SQLite and PostgreSQL, the two databases the engine runs on (system check
    ``workflows.E003``), quote identifiers alike, so the result depends on the name alone."""
    return name if name.startswith('"') and name.endswith('"') else f'"{name}"'


@functools.cache
def table(model: type[models.Model]) -> str:
    """The quoted table of ``model``, a model of this app (raises ``ValueError`` otherwise)."""
    if model._meta.app_label != APP_LABEL:
        raise ValueError(f"{model.__name__} is not a model of the {APP_LABEL} app")
    return _quoted(model._meta.db_table)


@functools.cache
def column(model: type[models.Model], name: str) -> str:
    """The quoted column of ``model``'s concrete field ``name`` (its name or attname).

    Raises ``FieldDoesNotExist`` for a name that is not a field, ``ValueError`` for a
    field without a column (a reverse relation) or a model of another app.
    """
    table(model)
    field = model._meta.get_field(name)
    name_in_db = field.column if field.concrete else None
    if name_in_db is None:
        raise ValueError(f"{model.__name__}.{name} has no column")
    return _quoted(name_in_db)


def status_literal(status: models.TextChoices) -> str:
    """A status, a member of one of the app's status enums (a closed, named set), as an
    SQL string literal.

    For the conditions a partial index is built on (``status = 'ready'``): a planner uses
    such an index only when the query states its condition as the same constant, which a
    bound parameter is not to SQLite. Anything but an enum member raises ``TypeError``.
    """
    if not isinstance(status, models.TextChoices):
        raise TypeError(f"{status!r} is not a member of a status enum")
    if not status.value.replace("_", "").isalpha():
        raise ValueError(f"{status!r} is not a plain status name")
    return "'" + status.value + "'"  # checked above: letters and underscores only
