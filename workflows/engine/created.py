"""Who created it: a create's result together with whether this call inserted the row.

Idempotent creates (a run by idempotency key, ...) return the existing row to a repeat
and to the losers of a race. Surfaces that must say which call created it (the API's
``201`` against ``200``) cannot learn it from a read before the insert: two racing
requests both read "absent" and both would say ``201``. ``Created.created`` is set from
the insert that won, inside the engine: ``True`` only for the call whose insert
committed the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["Created"]


@dataclass(frozen=True)
class Created(Generic[T]):
    """``value``, and whether this call's insert created it (``False``: it existed, or
    another call's insert won the race)."""

    value: T
    created: bool
