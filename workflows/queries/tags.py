"""Finding runs by their tags, and the tags in use.

:func:`tagged` is the one filter by tags every surface uses (``list_runs(tags=...)``,
the API's ``?tag=``, ``workflows_status --tag``, the console's tag filter); every given
tag must match. How each tag is asked depends on how many runs carry it, counted first
up to :data:`RARE_TAG_RUNS` (one index-only read of at most that many entries), because
PostgreSQL, listing newest first with ``LIMIT``, plans the two kinds of tag well with
two different forms (docs/architecture.md, "Tags", with the plans at a million runs):

- with a **rare** tag among them (at most :data:`RARE_TAG_RUNS` runs), each tag is a
  join of its ``RunTag`` row on the run's id and ``created_at`` (copied into the row):
  the rare tag's (key, value, created_at, run) index hands its runs out newest first,
  the other tags are probed by theirs, and the list stops after a page. As a semi-join
  the planner walked every run newest first, probing the tag of each;
- with only **common** tags, each is ``id IN (SELECT run_id FROM workflows_runtag WHERE
  key = %s AND value = %s)``: the planner walks the runs newest first, probing the tags,
  and finds a page at once. As a join it estimated the two equalities' result at one
  row and hashed every run.

With a status filter of rare final statuses only (failed, compensated, compensation
failed, cancelled, terminated: :data:`ENDED_RARELY`) on PostgreSQL, the runs in those
statuses that carry the tags are counted first, up to :data:`FEW_ENDED_RUNS`, through a
partial GIN index of those runs' ``tags`` (``workflows_run_tags_ended``, migration
0036); when they are few, the tags are that containment (``tags @> {...}``), read
through the same index: a customer without a failed run costs nothing, where the forms
above walk every run the customer ever had to find it has none. When they are many,
the forms above find a page among the tag's newest runs at once.

:func:`tag_keys` and :func:`tag_values` say which keys, and which values of one key, are
in use, for the console's filter to offer. Not ``SELECT DISTINCT`` over every tag row,
which reads them all (millions at a million runs): a loose index scan, a recursive query
that jumps from one key (value) to the next through the same index, so it costs one
index probe per distinct key (value) offered, however many runs carry them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from django.db import connections, router
from django.db.models import F, Model, QuerySet

from workflows.engine.sql.identifiers import column, table
from workflows.models import Run, RunTag
from workflows.status import RunStatus

__all__ = [
    "ENDED_RARELY",
    "FEW_ENDED_RUNS",
    "OFFERED_TAG_VALUES",
    "RARE_TAG_RUNS",
    "tag_keys",
    "tag_values",
    "tagged",
]

AnyRuns = TypeVar("AnyRuns", bound=Model)

RARE_TAG_RUNS = 10_000
"""A tag carried by at most this many runs is rare: read newest first from its index
(at most this many entries even when other filters reject them all); a tag carried by
more is common: a page of the newest runs walks about ``50 * runs / this`` of them."""

ENDED_RARELY = frozenset(
    {
        RunStatus.FAILED,
        RunStatus.COMPENSATED,
        RunStatus.COMPENSATION_FAILED,
        RunStatus.CANCELLED,
        RunStatus.TERMINATED,
    }
)
"""The final statuses whose runs' tags the partial GIN index ``workflows_run_tags_ended``
holds (PostgreSQL): a run enters it once, when it ends so; a plain step writes nothing
to it."""

FEW_ENDED_RUNS = 1_000
"""Tagged runs in rare final statuses few enough to read all and sort (at most this
many rows), rather than walk the tag's runs newest first."""

OFFERED_TAG_VALUES = 100
"""The most values of one key the console offers (in order); a value past them is
still reached by its address (``?tag=key:value``)."""


def tagged(
    runs: QuerySet[AnyRuns], tags: Mapping[str, str], statuses: Collection[str] = ()
) -> QuerySet[AnyRuns]:
    """``runs`` that carry every one of ``tags`` (key → value); all of ``runs`` for none.

    ``statuses``: the statuses ``runs`` is already filtered to, if any (it is not
    filtered here). With only rare final ones among them, on PostgreSQL, and at most
    :data:`FEW_ENDED_RUNS` such runs carrying the tags, the tags are a containment
    read through the partial GIN index of those runs (one query more, the count).
    Otherwise, with a rare tag among them, every tag is a join (each ``filter`` call on
    the relation joins anew; a run has one row a key, so no run comes twice): the rare
    one's index drives, the others are probed by their index; with none, every tag is a
    semi-join. See the module's docstring. One query more a tag, counting its runs up
    to :data:`RARE_TAG_RUNS`."""
    given = sorted(tags.items())
    if given and _few_ended(runs, dict(given), statuses):
        return runs.filter(tags__contains=dict(given))
    if any(_is_rare(key, value) for key, value in given):
        for key, value in given:
            runs = runs.filter(
                tag_rows__key=key, tag_rows__value=value, tag_rows__created_at=F("created_at")
            )
        return runs
    for key, value in given:
        runs = runs.filter(id__in=RunTag.objects.filter(key=key, value=value).values("run_id"))
    return runs


def _few_ended(runs: QuerySet[Any], tags: dict[str, str], statuses: Collection[str]) -> bool:
    """Whether at most :data:`FEW_ENDED_RUNS` runs in ``statuses`` (rare final ones
    only) carry ``tags``, on PostgreSQL (which has the partial GIN index): a bounded
    count through that index."""
    alias = runs.db
    if not statuses or not set(statuses) <= ENDED_RARELY:
        return False
    if connections[alias].vendor != "postgresql":
        return False
    found = Run.objects.using(alias).filter(status__in=sorted(statuses), tags__contains=tags)
    return found.order_by().values("pk")[: FEW_ENDED_RUNS + 1].count() <= FEW_ENDED_RUNS


def _is_rare(key: str, value: str) -> bool:
    """Whether at most :data:`RARE_TAG_RUNS` runs carry the tag (an index-only count)."""
    rows = RunTag.objects.filter(key=key, value=value).values("pk")[: RARE_TAG_RUNS + 1]
    return rows.count() <= RARE_TAG_RUNS


def _loose_scan(select: str, stepped: str, params: list[Any], limit: int) -> list[str]:
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
