"""The runs list's dismissed filter: runs an operator dismissed are left out unless
asked for (``dismiss_run``).

Without a choice the list shows the runs not dismissed, so a failed run someone has
seen to stops crowding the list and its attention filters; "Dismissed" shows only
those (read from the partial index of dismissed runs), "All runs" both. The same
predicate as the API's ``?dismissed=`` (:func:`workflows.queries.dismissed_filter`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from workflows.models import Run
from workflows.queries import dismissed_filter

if TYPE_CHECKING:
    from django.contrib.admin.filters import _ListFilterChoices
    from django.contrib.admin.views.main import ChangeList

__all__ = ["DismissedFilter"]


class DismissedFilter(admin.SimpleListFilter):
    """Not dismissed (the default), dismissed only, or every run."""

    title = "dismissed"
    parameter_name = "dismissed"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Dismissed"), ("all", "All runs")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        value = self.value()
        return dismissed_filter(queryset, value if value in ("yes", "all") else "no")

    def choices(self, changelist: ChangeList) -> Iterator[_ListFilterChoices]:
        """Django's "All" stands for the default here, which is "Not dismissed"."""
        yield {
            "selected": self.value() not in ("yes", "all"),
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "Not dismissed",
        }
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }
