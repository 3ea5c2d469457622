"""Values every supported database can store, checked before anything is written.

SQLite stores what PostgreSQL refuses: a NUL character (``\\x00``) in text or JSON, a
string longer than its column's ``max_length``. PostgreSQL refuses them with a raw
``DataError`` in the middle of a transition; neither accepts ``NaN`` in JSON nor a lone
surrogate in text. The verbs check their arguments here first, so that a bad value is
refused the same way on every database, with an :class:`~workflows.errors.InvalidInput`
naming the field and the limit, before anything is written. Limits are read from the
model fields, never repeated.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import models

from workflows.errors import InvalidInput

NUL = "\x00"


def max_length(model: type[models.Model], field_name: str) -> int:
    """The ``max_length`` of ``model.field_name``: the limit a value for it must keep."""
    field = model._meta.get_field(field_name)
    limit = field.max_length if isinstance(field, models.Field) else None
    assert limit is not None, f"{model.__name__}.{field_name} has no max_length"
    return limit


def check_text(
    value: Any, *, field: str, limit: int | None = None, error: type[Exception] = InvalidInput
) -> str:
    """Return ``value`` if it is a string the database stores, at most ``limit`` long.

    ``field`` names the value in the message (``"idempotency key"``); ``error`` is the
    class raised (:class:`InvalidInput` unless the caller's verb has its own).
    """
    if not isinstance(value, str):
        raise error(f"{field} must be a string, got {type(value).__name__}")
    problem = _text_problem(value)
    if problem is not None:
        raise error(f"{field} contains {problem}, which the database cannot store")
    if limit is not None and len(value) > limit:
        raise error(f"{field} is {len(value)} characters long; the limit is {limit}")
    return value


def check_json(value: Any, *, field: str, error: type[Exception] = InvalidInput) -> Any:
    """Return ``value`` if every supported database stores it as JSON and reads it back equal.

    Refused: what ``json`` cannot encode (sets, datetimes, objects), ``NaN`` and
    ``Infinity``, nesting too deep to encode, what a round trip changes (tuples, keys
    that are not strings), and a NUL character or a lone surrogate in any string or
    key, at any depth.
    """
    try:
        encoded = json.dumps(value, allow_nan=False)
    except ValueError as exc:  # NaN, Infinity, a reference cycle
        raise error(
            f"{field} is not storable JSON ({exc}): NaN, Infinity and cycles are refused"
        ) from exc
    except TypeError as exc:
        raise error(f"{field} is not JSON-serialisable: {exc}") from exc
    except RecursionError as exc:
        raise error(f"{field} is nested too deeply to store as JSON") from exc
    if json.loads(encoded) != value:
        raise error(
            f"{field} changes in a JSON round trip (tuples, non-string keys?); "
            "use plain lists and dicts with string keys"
        )
    where = _unstorable_text_in(value)
    if where is not None:
        raise error(f"{field} contains {where}, which the database cannot store")
    return value


def _text_problem(text: str) -> str | None:
    """Name what in ``text`` no database stores: a NUL character or a lone surrogate."""
    if NUL in text:
        return f"a NUL character (\\x00) at position {text.index(NUL)}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate ({text[exc.start]!r}) at position {exc.start}"
    return None


def _unstorable_text_in(value: Any) -> str | None:
    """Say where the first unstorable string or key of a JSON value is, or ``None``.

    Walked with a stack, not recursion, so that no depth ``json`` accepted can fail here.
    """
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, current = pending.pop()
        if isinstance(current, str):
            problem = _text_problem(current)
            if problem is not None:
                return f"{problem} of the string at {path}" if path else problem
            continue
        if isinstance(current, dict):
            for key in current:
                problem = _text_problem(key)
                if problem is not None:
                    return f"{problem} of the key {key!r}" + (f" at {path}" if path else "")
            children = [(f"{path}[{key!r}]", item) for key, item in current.items()]
        elif isinstance(current, list):
            children = [(f"{path}[{index}]", item) for index, item in enumerate(current)]
        else:
            continue
        pending.extend(reversed(children))
    return None
