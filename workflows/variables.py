"""Run variables: what a run's variables may hold, and what a patch may make of them.

A run's variables are one JSON object (``Run.variables``), set at its start
(``start_run(variables=...)``) and changed by its steps with JSON merge patches
(``ctx.set_variables(patch)``, RFC 7386, :mod:`workflows.merge_patch`). The rules are
here, once, for every caller: an object with string keys, storable JSON on every
supported database (:func:`~workflows.validation.check_json`), at most
``WORKFLOWS["MAX_VARIABLES_BYTES"]`` bytes of compact UTF-8 JSON once patched. Each
check returns the problem in words, or ``None``, so that a verb refuses it as
:class:`~workflows.errors.InvalidInput` and a handler's attempt fails for good with a
:class:`~workflows.errors.PermanentError`, both naming the rule.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from workflows.conf import workflow_settings
from workflows.errors import InvalidInput
from workflows.merge_patch import merge_patch
from workflows.validation import check_json

# The setting that bounds a run's variables, as messages name it.
LIMIT_SETTING = 'WORKFLOWS["MAX_VARIABLES_BYTES"]'


def object_problem(value: Any, *, field: str) -> str | None:
    """Why ``value`` cannot be a run's variables or a patch of them: not a JSON object
    (a dict with string keys) of storable JSON; ``None`` when it can."""
    if not isinstance(value, dict):
        return f"{field} must be a JSON object (a dict), got {type(value).__name__}"
    try:
        check_json(value, field=field)
    except InvalidInput as refused:
        return refused.message
    return None


def size_of(variables: dict[str, Any]) -> int:
    """How many bytes ``variables`` take as compact UTF-8 JSON: what the limit counts."""
    return len(json.dumps(variables, separators=(",", ":"), ensure_ascii=False).encode())


def size_problem(variables: dict[str, Any], *, field: str) -> str | None:
    """Why ``variables`` are too large to keep (past ``MAX_VARIABLES_BYTES``), or ``None``."""
    limit = workflow_settings.MAX_VARIABLES_BYTES
    size = size_of(variables)
    if size <= limit:
        return None
    return f"{field} would take {size} bytes of JSON; the limit is {LIMIT_SETTING} = {limit}"


def patched(variables: dict[str, Any], patches: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``variables`` with each of ``patches`` applied in order; neither is changed."""
    for patch in patches:
        variables = merge_patch(variables, patch)
    return variables


def checked_variables(value: Any, *, field: str = "variables") -> dict[str, Any]:
    """The variables a run starts with: ``value`` (``None``: none) applied as a merge patch
    to an empty object, so a ``null`` member is simply not stored, exactly as a step's
    patch would leave it. Refused with :class:`InvalidInput` (``field``) before anything
    is written: not an object, not storable JSON, or past the size limit."""
    if value is None:
        return {}
    problem = object_problem(value, field=field)
    if problem is None:
        value = merge_patch({}, value)
        problem = size_problem(value, field=field)
    if problem is not None:
        raise InvalidInput(problem, field=field)
    return value
