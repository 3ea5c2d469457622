"""The one rule for ids in URLs and query strings: the form the API hands out, nothing else.

Python's ``int()`` reads ``1_0``, ``+10``, `` 10 `` and full-width digits as 10, and
``UUID()`` reads braces, ``urn:uuid:`` and hex without hyphens: a client holding a
typo would be answered about another object than the one it named, and one object
would have many URLs. An id is therefore ASCII digits (integers, as gates always
required) or a hyphenated UUID; anything else is "not found", as an unknown id is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar
from uuid import UUID

from workflows.errors import FlowNotFound, RunNotFound, StepNotFound, WorkflowError

T = TypeVar("T")

# The largest primary key of a 64-bit ``BigAutoField``; a longer number names nothing,
# and the database refuses to compare a column with it.
MAX_INTEGER_ID = 2**63 - 1
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def integer_id(text: str) -> int | None:
    """The integer ``text`` spells in ASCII digits alone, if it may be an id; else ``None``."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_INTEGER_ID)):
        return None
    value = int(text)
    return value if value <= MAX_INTEGER_ID else None


def uuid_id(text: str) -> UUID | None:
    """The UUID ``text`` spells in its hyphenated form (either case); else ``None``."""
    return UUID(text) if _UUID.fullmatch(text) else None


def run_pk(text: str) -> UUID:
    """The run id in a URL; :class:`RunNotFound` (404 ``run_not_found``) if it is not one."""
    return _pk(text, uuid_id, RunNotFound, "run", "UUIDs")


def step_pk(text: str) -> int:
    """The step id in a URL; :class:`StepNotFound` (404 ``step_not_found``) if it is not one."""
    return _pk(text, integer_id, StepNotFound, "step", "integers")


def flow_pk(text: str) -> UUID:
    """The flow id in a URL; :class:`FlowNotFound` (404 ``flow_not_found``) if it is not one."""
    return _pk(text, uuid_id, FlowNotFound, "flow", "UUIDs")


def _pk(
    text: str,
    spelled: Callable[[str], T | None],
    not_found: type[WorkflowError],
    thing: str,
    kind: str,
) -> T:
    """The id of a ``thing`` that ``text`` spells, or ``not_found`` (a 404) naming it."""
    pk = spelled(text)
    if pk is None:
        raise not_found(f"{text!r} is not a {thing} id ({thing} ids are {kind})", **{thing: text})
    return pk
