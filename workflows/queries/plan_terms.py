"""Terms written so that the database's planner sees which index serves a list.

- :class:`StatusIn` writes a set of statuses into the statement. A database uses a
  partial index only for a query whose condition it can see implies the index's, and
  SQLite sees it only when the query repeats each term of the index's condition with
  the same literals: statuses Django binds as parameters (``status IN (%s, %s)``) never
  match an index made ``WHERE status IN ('a', 'b')``; PostgreSQL, too, proves the
  implication from constants. The statuses are sorted, as Django writes them into an
  index's condition (``Q(status__in=sorted(...))``).
- :class:`Unindexed` (SQLite) is a column as SQLite's unary ``+`` gives it: the same
  value, which no index serves, so that a condition on it is tested on each row read
  rather than chosen to read rows by (SQLite's documented way to steer its planner).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.db.models import F, Field, Func
from django.db.models.lookups import Lookup

__all__ = ["StatusIn", "Unindexed"]

# A status is a constant of the code: a lowercase word, never input. Checked anyway,
# since it is written into SQL unquoted by the driver.
_WORD = re.compile(r"^[a-z_]+$")


class StatusIn(Lookup):
    """``status IN ('a', 'b')`` (``NOT (status IN (...))`` when ``negated``), with the
    statuses sorted and written out.

    A lookup rather than a boolean function: Django 6 compares a function used as a
    condition with ``= True`` (``status IN (...) = True``), which no partial index's
    condition matches; a lookup is a condition as it stands."""

    lookup_name = "status_in_literal"
    prepare_rhs = False

    def __init__(self, statuses: Iterable[str], *, negated: bool = False) -> None:
        words = sorted(str(status) for status in statuses)
        if not words or not all(_WORD.match(word) for word in words):
            raise ValueError(f"statuses are lowercase words, at least one: {words!r}")
        self.negated = negated
        super().__init__(F("status"), tuple(words))

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        column, params = self.process_lhs(compiler, connection)
        condition = "{} IN ({})".format(column, ", ".join(f"'{word}'" for word in self.rhs))
        return (f"NOT ({condition})" if self.negated else condition), list(params)


class Unindexed(Func):
    """``+column`` (SQLite): the column's value, through which no index is read."""

    template = "+%(expressions)s"

    def __init__(self, column: str, output_field: Field) -> None:
        super().__init__(F(column), output_field=output_field)
