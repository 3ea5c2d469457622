"""A JSON array column expanded into rows, on either database.

Membership in a JSON array is a test Django's lookups make on PostgreSQL only
(``contains`` is not supported on SQLite). Both databases can expand the array into
rows (``jsonb_array_elements_text``, ``json_each``), and ``EXISTS`` over those rows
tests membership in the database, row by row. The readers that filter on a JSON list
(an event consumer's workflows and kinds, a gate's assignees) build their conditions
on this one expansion.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def array_rows(
    column: str, params: Sequence[Any], vendor: str, *, key: str | None = None
) -> tuple[str, list[Any]]:
    """``FROM`` text naming each element of the array ``column`` as ``listed.value``.

    ``column`` is compiled SQL with its ``params``; with ``key``, the array is the
    column's member of that name (an object of arrays). Returns the text and the
    parameters it needs, the column's first.
    """
    if vendor == "postgresql":
        if key is None:
            return f"jsonb_array_elements_text({column}) AS listed(value)", [*params]
        return f"jsonb_array_elements_text({column} -> %s) AS listed(value)", [*params, key]
    if key is None:
        return f"json_each({column}) AS listed", [*params]
    return f"json_each({column}, %s) AS listed", [*params, f'$."{key}"']
