"""``{% workflows_console as console %}``: the admin index's links to the operator console;
``{% run_date_hierarchy cl %}``: the runs list's date drill-down at a fixed cost.

A value, like ``{% approvals_inbox %}``: the index shows the dashboard, the runs list
and the start page to those who may use them, and costs no query (permissions are
cached on the user for the request).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from django import template
from django.contrib.admin.templatetags.admin_list import date_hierarchy
from django.db.models import Max, Min, QuerySet
from django.urls import reverse
from django.utils import timezone

from workflows.permissions import VIEW_RUN
from workflows.services.access import CHANGE_SCHEDULES, OPERATE_RUNS, START_RUNS, VIEW_SCHEDULES

if TYPE_CHECKING:
    from django.contrib.admin.views.main import ChangeList

    from workflows.permissions import AnyUser

register = template.Library()


@register.simple_tag(takes_context=True)
def workflows_console(context: dict[str, Any]) -> dict[str, Any]:
    """Links to the dashboard, runs, waits and event consumers for viewers, to the
    recovery of stuck units for operators, and to the start page for starters."""
    request = context.get("request")
    user: AnyUser | None = getattr(request, "user", None)
    if user is None or not user.is_active or not user.is_staff:
        return {"visible": False}
    views = user.has_perm(VIEW_RUN)
    starts = START_RUNS.allows(user)
    schedules = VIEW_SCHEDULES.allows(user) or CHANGE_SCHEDULES.allows(user)
    return {
        "visible": views or starts or schedules,
        "dashboard_url": reverse("admin:workflows_dashboard") if views else None,
        "runs_url": reverse("admin:workflows_run_changelist") if views else None,
        "waits_url": reverse("admin:workflows_waits") if views else None,
        "consumers_url": reverse("admin:workflows_consumers") if views else None,
        "units_url": reverse("admin:workflows_bulk_units")
        if views and OPERATE_RUNS.allows(user)
        else None,
        "schedules_url": reverse("admin:workflows_schedule_changelist") if schedules else None,
        "start_url": reverse("admin:workflows_run_start") if starts else None,
    }


class _SpannedDates:
    """A changelist's queryset whose ``datetimes()`` lists every year, month or day
    between the first and the last row instead of the distinct ones.

    Django's date hierarchy asks for the distinct truncated dates of the whole
    selection (``SELECT DISTINCT`` of a function over every row: a second on SQLite at
    100,000 runs). The span is the first and the last row in the field's order, two
    lookups that walk the field's index from either end (SQLite reads a whole table for
    ``MIN`` and ``MAX`` in one statement, and for either under a filter), asked once
    for both of Django's questions (the span, then the dates in it); a period without
    runs may be offered, and shows an empty list.
    """

    def __init__(self, queryset: QuerySet[Any]) -> None:
        self.queryset = queryset
        self._spans: dict[str, dict[str, Any]] = {}

    def _span(self, field: str) -> dict[str, Any]:
        if field not in self._spans:
            ends = self.queryset.order_by().values_list(field, flat=True)
            self._spans[field] = {
                "first": ends.order_by(field).first(),
                "last": ends.order_by(f"-{field}").first(),
            }
        return self._spans[field]

    def aggregate(self, *, first: Min, last: Max) -> dict[str, Any]:
        """The span Django's ``date_hierarchy`` asks for, as ``first`` and ``last``."""
        return self._span(first.get_source_expressions()[0].name)

    def datetimes(self, field: str, kind: str) -> list[datetime]:
        span = self._span(field)
        if span["first"] is None:
            return []
        first, last = (timezone.localtime(span[end]) for end in ("first", "last"))
        if kind == "year":
            return [
                first.replace(year=year, month=1, day=1)
                for year in range(first.year, last.year + 1)
            ]
        if kind == "month":
            low = first.month if first.year == last.year else 1
            return [first.replace(month=month, day=1) for month in range(low, last.month + 1)]
        start = first.replace(hour=0, minute=0, second=0, microsecond=0)
        return [start + timedelta(days=n) for n in range((last.date() - first.date()).days + 1)]


class _SpannedChangeList:
    """A changelist seen through :class:`_SpannedDates`; everything else is the list's."""

    def __init__(self, changelist: ChangeList) -> None:
        self._changelist = changelist
        self.queryset = _SpannedDates(_dated(changelist))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._changelist, name)


def _dated(changelist: ChangeList) -> QuerySet[Any]:
    """The rows the span is read from: every row, narrowed only by the list's own
    conditions on the hierarchy's date (the drill-down and the date filter).

    With the list's other filters the span's two lookups walk the date's index from
    either end until a row passes them: at a million runs, seconds for a filter few
    runs pass (a deadline within the hour). Without them each is one index entry, and a
    period where no filtered run lies is offered as one without runs would be.
    """
    field = changelist.date_hierarchy
    on_date = {
        key: value
        for key, value in changelist.params.items()
        if key.startswith(f"{field}__") and not isinstance(value, list)
    }
    return changelist.root_queryset.filter(**on_date)


@register.inclusion_tag("admin/date_hierarchy.html")
def run_date_hierarchy(changelist: ChangeList) -> dict[str, Any]:
    """Django's date hierarchy for the runs list, without its ``SELECT DISTINCT``."""
    # A stand-in, not a subclass: it forwards every attribute date_hierarchy reads.
    return date_hierarchy(cast("ChangeList", _SpannedChangeList(changelist))) or {}
