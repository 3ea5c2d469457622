"""The short form of an id: what a table, a sentence or a command prints of a run's or
a flow's UUID when the whole id is a hover or a ``--json`` away.

Eight hexadecimal characters tell thousands of runs apart, and every operator command
takes them back as ``RUN`` or ``FLOW`` (an id prefix of at least four characters).
"""

from __future__ import annotations

from typing import Any

SHORT_ID_CHARS = 8


def short_id(value: Any) -> str:
    """The first :data:`SHORT_ID_CHARS` characters of ``value``'s id text."""
    return str(value)[:SHORT_ID_CHARS]
