"""Run tags: what a run's tags may be, and what a patch may make of them.

A run's tags are a flat mapping of short keys to short strings (``{"customer": "acme",
"region": "eu"}``), kept on the run (``Run.tags``, what is shown and returned) and, one
row a tag, in ``RunTag`` (what a filter by tag reads through its index;
:mod:`workflows.engine.tags`). The rules are here, once, for every caller: a key matches
``^[a-z][a-z0-9_.-]{0,63}$``, a value is a string of at most 255 characters without a
NUL (nor a lone surrogate, which no database stores either), a run has at most 32 tags.
Each check names the tag it refuses, so that a verb refuses it as
:class:`~workflows.errors.InvalidInput` and a handler's attempt fails for good with a
:class:`~workflows.errors.PermanentError`, both before anything is written.

The filters' text form, ``key:value`` (the API's ``?tag=``) or ``key=value`` (the
commands' ``--tag``), is parsed here too (:func:`parse_tag`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from workflows.errors import InvalidInput

KEY_PATTERN = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
"""A tag's key: a lowercase letter, then up to 63 of ``a-z 0-9 _ . -``."""
MAX_VALUE_LENGTH = 255
"""The longest value a tag may hold (``RunTag.value``)."""
MAX_TAGS = 32
"""The most tags a run may have."""


def key_problem(key: Any) -> str | None:
    """Why ``key`` cannot be a tag's key, or ``None``."""
    if not isinstance(key, str):
        return f"tag key {key!r} must be a string, got {type(key).__name__}"
    if not KEY_PATTERN.fullmatch(key):
        return f"tag key {key!r} must match ^[a-z][a-z0-9_.-]{{0,63}}$"
    return None


def value_problem(key: str, value: Any) -> str | None:
    """Why ``value`` cannot be the value of tag ``key``, or ``None``."""
    if not isinstance(value, str):
        return f"tag {key!r} must be a string, got {type(value).__name__}"
    if len(value) > MAX_VALUE_LENGTH:
        return f"tag {key!r} is {len(value)} characters long; the limit is {MAX_VALUE_LENGTH}"
    if "\x00" in value:
        return f"tag {key!r} contains a NUL character, which the database cannot store"
    if any(0xD800 <= ord(char) <= 0xDFFF for char in value):
        return f"tag {key!r} contains a lone surrogate, which the database cannot store"
    return None


def count_problem(tags: Mapping[str, str], *, field: str = "tags") -> str | None:
    """Why a run cannot have ``tags`` for their number (past :data:`MAX_TAGS`), or ``None``."""
    if len(tags) <= MAX_TAGS:
        return None
    return f"{field} would be {len(tags)} tags; a run has at most {MAX_TAGS}"


def patch_problem(patch: Any, *, removals: bool) -> tuple[str, str | None] | None:
    """Why ``patch`` cannot be a run's tags (``removals=False``) or a change of them
    (``removals=True``: a value ``None`` removes its key), as (the problem, the tag it
    names); ``None`` when it can."""
    if not isinstance(patch, dict):
        return f"tags must be a dict of key to value, got {type(patch).__name__}", None
    for key, value in patch.items():
        problem = key_problem(key)
        if problem is None and not (removals and value is None):
            problem = value_problem(key, value)
        if problem is not None:
            return problem, key if isinstance(key, str) else repr(key)
    return None


def patched(tags: Mapping[str, str], patches: Iterable[Mapping[str, str | None]]) -> dict[str, str]:
    """``tags`` with each of ``patches`` applied in order (``None`` removes a key)."""
    result = dict(tags)
    for patch in patches:
        for key, value in patch.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = value
    return result


def checked_tags(value: Any, *, field: str = "tags") -> dict[str, str]:
    """The tags a run starts with: ``value`` (``None``: none), checked. Refused with
    :class:`InvalidInput` naming the tag (``field``, and ``tag``) before anything is
    written: not a dict, a bad key, a value that is not a storable string of at most
    255 characters, more than 32 tags."""
    if value is None:
        return {}
    found = patch_problem(value, removals=False)
    if found is not None:
        problem, tag = found
        raise InvalidInput(f"{field}: {problem}", field=field, tag=tag)
    too_many = count_problem(value, field=field)
    if too_many is not None:
        raise InvalidInput(too_many, field=field)
    return dict(sorted(value.items()))


def parse_tag(text: str, *, separator: str = ":", field: str = "tag") -> tuple[str, str]:
    """``key:value`` (or ``key=value`` with ``separator="="``) as ``(key, value)``;
    :class:`InvalidInput` naming ``text`` when it has no separator, a bad key or value.
    The value is everything after the first separator, so it may hold the separator."""
    key, found, value = text.partition(separator)
    if not found:
        raise InvalidInput(
            f"{field} {text!r} must be key{separator}value, e.g. customer{separator}acme",
            field=field,
        )
    problem = key_problem(key) or value_problem(key, value)
    if problem is not None:
        raise InvalidInput(f"{field} {text!r}: {problem}", field=field)
    return key, value


def parse_tags(texts: Iterable[str], *, separator: str = ":", field: str = "tag") -> dict[str, str]:
    """Several ``key:value`` texts as one mapping (every one must match); a key given
    twice with two values matches nothing, so it is refused, naming both."""
    tags: dict[str, str] = {}
    for text in texts:
        key, value = parse_tag(text, separator=separator, field=field)
        if tags.get(key, value) != value:
            raise InvalidInput(
                f"{field} {key!r} is given twice ({tags[key]!r} and {value!r}); "
                "a run has one value a key",
                field=field,
            )
        tags[key] = value
    return tags
