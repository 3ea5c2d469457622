"""Who created it: a create's result together with whether this call inserted the row.

Idempotent creates (a run by idempotency key, ...) return the existing row to a repeat
and to the losers of a race. Surfaces that must say which call created it (the API's
``201`` against ``200``) cannot learn it from a read before the insert: two racing
requests both read "absent" and both would say ``201``. ``Created.created`` is set from
the insert that won, inside the engine: ``True`` only for the call whose insert
committed the row.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Generic, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

__all__ = ["Created", "value_of"]


@dataclass(frozen=True)
class Created(Generic[T]):
    """``value``, and whether this call's insert created it (``False``: it existed, or
    another call's insert won the race)."""

    value: T
    created: bool


def value_of(once: Callable[P, Created[T]], name: str, doc: str) -> Callable[P, T]:
    """The verb ``name``: what ``once`` does, returning the value alone, for callers that
    need not know which call created it (``start_run`` of ``start_run_once``, ...). It
    takes ``once``'s parameters (``inspect.signature``, ``help()`` and type checkers
    read them there) and has its own docstring ``doc``."""

    @wraps(once)
    def verb(*args: P.args, **kwargs: P.kwargs) -> T:
        return once(*args, **kwargs).value

    verb.__name__ = verb.__qualname__ = name
    verb.__doc__ = doc
    # Its own return type for inspect.signature and help(): the value ``Created`` holds.
    once_signature = inspect.signature(once)
    returned = _CREATED.fullmatch(str(once_signature.return_annotation))
    verb.__signature__ = once_signature.replace(  # type: ignore[attr-defined]
        return_annotation=returned.group(1) if returned else inspect.Signature.empty
    )
    return verb


# ``Created[X]`` as the annotation of a ``*_once`` verb reads (annotations are strings).
_CREATED = re.compile(r"Created\[(.+)\]")
