"""A page of a runs list newest first, read by walking the creation index when the
list's rows are many (SQLite).

A list newest first is read one of two ways: walk the runs' creation index and test
each run against the filters until a page has passed, or read every run the filters
select through another index and sort them. The walk wins when many runs pass (a page
is found after ``page * runs / passing`` entries), the sort when few do. PostgreSQL's
statistics tell it which. SQLite keeps none of how a column's values spread (Python's
builds have no ``sqlite_stat4``): searched by a business key's start, it reads the key's
range through the key's index and sorts it, which for ``BK-4`` at a million runs is
111,112 runs to show 50.

:func:`newest_first` reads a page by the walk: the ids of the page in a subquery that
names the creation index (``INDEXED BY``), the rows themselves (with the list's
annotations) by those ids. The decision is the caller's, from the count the list makes
anyway (:class:`workflows.admin.runs.BoundedCountPaginator`: more runs pass than its cap).
"""

from __future__ import annotations

import re
from typing import TypeVar

from django.db import connections
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from workflows.models import Run

__all__ = ["CREATION_INDEX", "NEWEST_FIRST", "newest_first"]

RunRows = TypeVar("RunRows", bound=Run)

CREATION_INDEX = "workflows_run_created"
"""The runs' index ``(created_at)`` (``Run.Meta.indexes``), walked newest first."""

NEWEST_FIRST = ("-created_at", "-id")
"""The only order :func:`newest_first` walks: the runs lists' default."""


def newest_first(runs: QuerySet[RunRows], bottom: int, top: int) -> QuerySet[RunRows]:
    """``runs[bottom:top]``: on SQLite, for ``runs`` ordered :data:`NEWEST_FIRST`, the
    same rows read by walking :data:`CREATION_INDEX`; otherwise the slice itself.

    The rows and their order are the slice's: the subquery is the slice's own statement
    (its conditions, order, limit and offset) with the index named; the outer query
    reads the rows by those ids, with ``runs``' annotations and order.
    """
    connection = connections[runs.db]
    # The admin's changelist repeats its ordering (the model admin's, then its own
    # tie-break): only the first mention of a field orders.
    order = tuple(dict.fromkeys(str(field) for field in runs.query.order_by))
    if connection.vendor != "sqlite" or order != NEWEST_FIRST:
        return runs[bottom:top]
    key = Run._meta.pk
    assert key is not None  # a model always has one
    sql, params = runs.values(key.name)[bottom:top].query.get_compiler(runs.db).as_sql()
    quote = connection.ops.quote_name
    table = quote(Run._meta.db_table)
    # ``SELECT "workflows_run"."id" AS "id" FROM "workflows_run" WHERE … ORDER BY …``
    column = re.escape(f"{table}.{quote(key.column)}")
    head = re.match(rf'SELECT {column}(?: AS "\w+")? FROM {re.escape(table)} ', sql)
    if head is None:
        # Not the statement of one table's ids this reads (never so for a runs list).
        return runs[bottom:top]
    walk = f"{head.group()}INDEXED BY {quote(CREATION_INDEX)} {sql[head.end() :]}"
    if len(runs.query.alias_map) > 1:
        # A join (a tag filter's): its conditions stay beside the ids, or a run
        # would come once per joined row.
        return runs.filter(pk__in=RawSQL(walk, params))
    # The ids alone choose the rows: kept beside them, the list's conditions led SQLite
    # back to the index it would have sorted from, testing each run against the ids.
    rows = runs.all()
    rows.query.clear_where()
    return rows.filter(pk__in=RawSQL(walk, params))
