"""The runs list's deadline filter: runs that must end within the hour or the day (or
should have already), and runs whose deadline has passed.

The predicates are :mod:`workflows.queries.deadlines`'s, the API's ``near_deadline``
too, and read the partial index of runs with a deadline.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from workflows.models import Run
from workflows.queries.deadlines import DEADLINE_WINDOWS, deadline_passed, near_deadline

__all__ = ["DeadlineFilter"]


class DeadlineFilter(admin.SimpleListFilter):
    """Filter runs by their deadline (``start_run(deadline=...)``, ``Workflow.deadline``)."""

    title = "deadline"
    parameter_name = "deadline"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("hour", "Within 1 hour (or overdue)"),
            ("day", "Within 1 day (or overdue)"),
            ("passed", "Passed"),
            ("any", "Has a deadline"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        value = self.value()
        now = timezone.now()
        if value in DEADLINE_WINDOWS:
            return queryset.filter(near_deadline(DEADLINE_WINDOWS[value], now))
        if value == "passed":
            return queryset.filter(deadline_passed(now))
        if value == "any":
            return queryset.filter(deadline__isnull=False)
        return queryset
