"""The runs list of the operator console: columns that read at a glance, filters, search.

The list must stay fast at hundreds of thousands of runs, so every page costs the same
few queries whatever the table's size:

- progress and attention are subqueries in the page's one SELECT (evaluated for the
  rows shown, not the table);
- the workflow filter lists registered workflows (no ``SELECT DISTINCT`` over runs);
- there is no full ``COUNT(*)``: :class:`BoundedCountPaginator` counts at most
  :data:`COUNT_CAP` rows and ``show_full_result_count`` is off;
- an id prefix is searched as a range of the primary key, which the index answers;
- a search more runs match than the count's cap reads its page by walking the creation
  index on SQLite (``BoundedCountPaginator(walk_when_capped=True)``,
  :mod:`workflows.queries.newest_first`), not by sorting every match;
- a sort by a column many runs share (workflow, status) breaks its ties in the column's
  own direction (:class:`RunsChangeList`), so that one index per column serves both
  directions and a page reads its rows in index order instead of sorting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict
from uuid import UUID

from django.contrib import admin
from django.contrib.admin.views.main import ORDER_VAR, ChangeList
from django.core.paginator import Page, Paginator
from django.db import connections, router
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

from workflows import text
from workflows.definitions import registry
from workflows.models import Run, Step
from workflows.queries import (
    Attention,
    attention_of,
    runs_needing_attention,
)
from workflows.queries.newest_first import newest_first
from workflows.status import StepStatus

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _Progress(TypedDict):
        """What :func:`runs_with_progress` annotates each run with."""

        steps_total: int
        steps_done: int
        attention: str

    RunWithProgress = WithAnnotations[Run, _Progress]

__all__ = [
    "COUNT_CAP",
    "AttentionFilter",
    "BoundedCountPaginator",
    "RunsChangeList",
    "WorkflowFilter",
    "badge",
    "duration",
    "id_prefix_range",
    "key_or_its_start",
    "pretty",
    "runs_with_progress",
    "short_id",
]

# How many rows the list counts before it stops and says "more than". Counting every
# row of a large table takes a full index scan per page view on PostgreSQL and SQLite;
# nobody pages through ten thousand runs, they filter.
COUNT_CAP = 10_000
# Step statuses that count as done in a run's progress.
DONE_STEPS = (StepStatus.COMPLETED, StepStatus.SKIPPED)
_HEX = re.compile(r"^[0-9a-f]{1,32}$")


class BoundedCountPaginator(Paginator):
    """A paginator whose ``count`` stops at :data:`COUNT_CAP`.

    Django's admin counts the filtered rows for every page (``SELECT COUNT(*)``), which
    reads the whole table or index: fine for a thousand runs, seconds for millions.
    Counting ``LIMIT COUNT_CAP + 1`` rows instead costs at most that many index
    entries; ``capped`` tells the template to say "more than" rather than a number.
    """

    # The runs changelist pages a queryset, which the bounded count needs, not any sequence.
    object_list: QuerySet[Run]

    def __init__(self, *args: Any, walk_when_capped: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.walk_when_capped = walk_when_capped

    def page(self, number: Any) -> Page:
        """The page ``number``; with ``walk_when_capped`` and more rows than the cap,
        its rows read by walking the creation index (:func:`newest_first`: on SQLite,
        for a list newest first), since so many rows pass that a page is found at once."""
        if not (self.walk_when_capped and self.capped):
            return super().page(number)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        return Page(newest_first(self.object_list, bottom, top), number, self)

    @cached_property
    def _bounded(self) -> int:
        return self.object_list.values("pk").order_by()[: COUNT_CAP + 1].count()

    @cached_property
    def count(self) -> int:
        return min(self._bounded, COUNT_CAP)

    @property
    def capped(self) -> bool:
        """Whether there are more rows than the count says."""
        return self._bounded > COUNT_CAP


# The runs list's tie-break (its default ordering and Django's deterministic ``pk``).
TIE_BREAK = frozenset({"created_at", "id", "pk"})


class RunsChangeList(ChangeList):
    """The runs list, whose ties under a chosen column follow that column's direction.

    Sorted by workflow, say, the runs of one workflow are ordered by creation time and
    id: newest first under a descending sort, oldest first under an ascending one. With
    the tie-break always newest first, an ascending sort mixes directions, which no
    index read forwards or backwards gives: SQLite sorted a workflow's tens of
    thousands of runs to show 50 (issue #26). Without a chosen column the list is
    newest first, as before.
    """

    def get_ordering(self, request: HttpRequest, queryset: QuerySet[Any]) -> list[Any]:
        ordering = list(super().get_ordering(request, queryset))
        if ORDER_VAR not in self.params or not ordering or not isinstance(ordering[0], str):
            return ordering
        sign = "-" if ordering[0].startswith("-") else ""
        return [ordering[0], *(_directed(field, sign) for field in ordering[1:])]


def _directed(field: Any, sign: str) -> Any:
    """``field`` in the direction ``sign`` when it is one of the tie-break's, else as is."""
    if isinstance(field, str) and field.lstrip("-") in TIE_BREAK:
        return sign + field.lstrip("-")
    return field


def _count_of(steps: QuerySet[Step]) -> Coalesce:
    """A correlated ``COUNT`` of ``steps`` (filtered on ``run=OuterRef('pk')``) per run."""
    counted = steps.order_by().values("run").annotate(total=Count("pk")).values("total")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def runs_with_progress(runs: QuerySet[Run], now: datetime) -> QuerySet[RunWithProgress]:
    """``runs`` with ``steps_total``, ``steps_done`` and ``attention`` annotated.

    Subqueries, so a page of runs costs one SELECT; the step index ``(run, status)``
    answers each count.
    """
    per_run = Step.objects.filter(run=OuterRef("pk"))
    return runs.annotate(
        steps_total=_count_of(per_run),
        steps_done=_count_of(per_run.filter(status__in=DONE_STEPS)),
        attention=attention_of(now),
    )


def search_with_id_prefix(
    queryset: QuerySet[Any], search_term: str, matches: Callable[[str], Q]
) -> tuple[QuerySet[Any], bool]:
    """A changelist search: rows ``matches(term)`` admits, or whose id starts with the
    term (:func:`id_prefix_range`); no duplicates to remove."""
    term = search_term.strip()
    if not term:
        return queryset, False
    by_id = id_prefix_range(term)
    return queryset.filter(matches(term) | by_id if by_id else matches(term)), False


def key_or_its_start(term: str) -> Q:
    """Runs whose business key is ``term`` or starts with it (the key itself is its own
    start), as the key's index answers.

    PostgreSQL's pattern index (``varchar_pattern_ops``) answers ``LIKE 'term%'``.
    SQLite's ``LIKE`` ignores case and so reads no index: there the start is the range
    of keys from ``term`` up to the term with its last character's successor, which
    the key's index answers (and which, as on PostgreSQL, minds case).
    """
    if connections[router.db_for_read(Run)].vendor != "sqlite" or term[-1] == chr(0x10FFFF):
        return Q(business_key__startswith=term)
    successor = term[:-1] + chr(ord(term[-1]) + 1)
    return Q(business_key__gte=term, business_key__lt=successor)


def id_prefix_range(term: str) -> Q | None:
    """Runs whose id starts with ``term`` (hex, dashes ignored), as a primary-key range.

    ``id LIKE 'ab12%'`` cannot use the primary key on PostgreSQL (a ``uuid`` column), a
    range can: ids starting with ``ab12`` lie between ``ab120000-…`` and ``ab12ffff-…``.
    """
    digits = term.lower().replace("-", "")
    if not _HEX.match(digits):
        return None
    return Q(pk__gte=UUID(digits.ljust(32, "0")), pk__lte=UUID(digits.ljust(32, "f")))


def short_id(run_id: Any) -> SafeString:
    """A run id as its first characters, the whole id on hover; never wraps."""
    return format_html('<span class="wf-id" title="{}">{}</span>', run_id, text.short_id(run_id))


def badge(status: str, label: str | None = None) -> SafeString:
    """A status as a coloured badge (``wf-badge st-<status>``, styled by console.css)."""
    return format_html(
        '<span class="wf-badge st-{}">{}</span>', status, label or status.replace("_", " ")
    )


class StatusBadgeColumn:
    """A changelist's ``status`` column as the console's coloured badge, sortable."""

    @admin.display(description="status", ordering="status")
    def status_badge(self, row: Any) -> SafeString:
        return badge(row.status)


def pretty(value: Any) -> str:
    """JSON as a person reads it: indented, keys in their order, non-ASCII as is."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def items(count: int) -> str:
    """``1 item``, ``3 items``: a count of fan-out items or list entries in words."""
    return ngettext("%(count)d item", "%(count)d items", count) % {"count": count}


def duration(start: datetime | None, end: datetime | None, now: datetime) -> str:
    """How long from ``start`` to ``end`` (or ``now``) in the app's words
    (:func:`workflows.text.duration`: ``2 hours, 5 minutes``, ``850 ms``); empty
    without a start."""
    if start is None:
        return ""
    return text.duration(max((end or now) - start, timedelta(0)))


class WorkflowFilter(admin.SimpleListFilter):
    """Filter by workflow name, offering the registered workflows.

    Django's field filter would run ``SELECT DISTINCT workflow_name`` over every run on
    each page view; the registry is in memory. A run of a workflow no longer registered
    is still found by searching or by its own link.
    """

    title = "workflow"
    parameter_name = "workflow"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = sorted({workflow.name for workflow in registry.all()})
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        value = self.value()
        return queryset.filter(workflow_name=value) if value else queryset


class AttentionFilter(admin.SimpleListFilter):
    """Filter by attention class, with :func:`runs_needing_attention`'s SQL, which
    agrees with the ``attention`` column by construction."""

    title = "attention"
    parameter_name = "attention"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            (str(value), "None needed" if value == Attention.OK else str(label))
            for value, label in Attention.choices
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        value = self.value()
        if value not in Attention.values:
            return queryset
        return runs_needing_attention(value, now=timezone.now(), runs=queryset)
