"""The runs list's filter by schedule: the runs one schedule started.

Offers the schedules themselves (a small table), not ``SELECT DISTINCT`` over every
run; a value that is no schedule id (an edited address) is Django's “incorrect lookup”
redirect, not an error page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest

from workflows.models import Run, Schedule

OFFERED = 50
"""The most schedules the filter lists; the others are reached from their own page."""


class ScheduleFilter(admin.SimpleListFilter):
    """Filter runs by the schedule that started them."""

    title = "schedule"
    parameter_name = "schedule"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        keys = Schedule.objects.order_by("key").values_list("pk", "key")[:OFFERED]
        return [(str(pk), key) for pk, key in keys]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        value = self.value()
        if not value:
            return queryset
        if not value.isdigit() or len(value) > 18:
            raise IncorrectLookupParameters(f"{value!r} is not a schedule id")
        return queryset.filter(schedule_id=int(value))
