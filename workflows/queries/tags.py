"""Finding runs by their tags, and the tags in use.

:func:`tagged` is the one filter by tags every surface uses (``list_runs(tags=...)``,
the API's ``?tag=``, ``workflows_status --tag``, the console's tag filter); every given
tag must match. Each tag is a join of its ``RunTag`` row on the run's id and on its
``created_at`` (copied into the row): at most one row a run and key, so no run comes
twice, and the equal ``created_at`` lets PostgreSQL read the newest runs of a tag from
the (key, value, created_at, run) index in the lists' order (newest first), stopping
after a page, however rare or common the tag; a semi-join (``id IN (SELECT run_id
...)``) left it walking every run newest first, probing the tag of each, for a rare tag
(docs/architecture.md, "Tags").

:func:`tag_keys` and :func:`tag_values` say which keys, and which values of one key, are
in use, for the console's filter to offer. Not ``SELECT DISTINCT`` over every tag row,
which reads them all (millions at a million runs): a loose index scan, a recursive query
that jumps from one key (value) to the next through the same index, so it costs one
index probe per distinct key (value) offered, however many runs carry them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from django.db import connections, router
from django.db.models import F, Model, QuerySet

from workflows.engine.sql.identifiers import column, table
from workflows.models import RunTag

__all__ = ["OFFERED_TAG_VALUES", "tag_keys", "tag_values", "tagged"]

AnyRuns = TypeVar("AnyRuns", bound=Model)

OFFERED_TAG_VALUES = 100
"""The most values of one key the console offers (in order); a value past them is
still reached by its address (``?tag=key:value``)."""


def tagged(runs: QuerySet[AnyRuns], tags: Mapping[str, str]) -> QuerySet[AnyRuns]:
    """``runs`` that carry every one of ``tags`` (key → value); all of ``runs`` for none.

    One join a tag (each ``filter`` call on the relation joins anew), each on the run's
    id, the tag's key and value, and the run's ``created_at``."""
    for key, value in sorted(tags.items()):
        runs = runs.filter(
            tag_rows__key=key, tag_rows__value=value, tag_rows__created_at=F("created_at")
        )
    return runs


def _loose_scan(select: str, stepped: str, params: list[object], limit: int) -> list[str]:
    """The distinct values of column ``stepped`` that ``select`` finds one at a time
    (``%(after)s`` is where "past the previous one" goes), in order, at most ``limit``:
    a recursive query, one index probe each."""
    alias = router.db_for_read(RunTag)
    first = select.replace("%(after)s", "")
    following = select.replace("%(after)s", f"AND {stepped} > found.item")
    sql = (
        "WITH RECURSIVE found(item, n) AS ("
        f"SELECT ({first}), 1 "
        "UNION ALL "
        f"SELECT ({following}), n + 1 FROM found WHERE found.item IS NOT NULL AND n < %s"
        ") SELECT item FROM found WHERE item IS NOT NULL"
    )
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, [*params, *params, limit])
        return [row[0] for row in cursor.fetchall()]


def tag_keys(limit: int = OFFERED_TAG_VALUES) -> list[str]:
    """The tag keys in use, in order, at most ``limit`` (a loose index scan)."""
    key = column(RunTag, "key")
    select = f"SELECT {key} FROM {table(RunTag)} WHERE 1 = 1 %(after)s ORDER BY {key} LIMIT 1"
    return _loose_scan(select, key, [], limit)


def tag_values(key: str, limit: int = OFFERED_TAG_VALUES) -> list[str]:
    """The values of tag ``key`` in use, in order, at most ``limit`` (a loose index
    scan of the (key, value, run) index)."""
    value = column(RunTag, "value")
    select = (
        f"SELECT {value} FROM {table(RunTag)} WHERE {column(RunTag, 'key')} = %s "
        f"%(after)s ORDER BY {value} LIMIT 1"
    )
    return _loose_scan(select, value, [key], limit)
