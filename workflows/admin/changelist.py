"""Changelist filters and selections that the database cannot answer.

Django's admin turns a lookup it cannot build into its "incorrect lookup" redirect
(``?e=1``), but some values only fail when the query runs: an id beyond the database's
integers (``?step=99999999999999999999``) or a year beyond Python's dates
(``?created_at__year=99999``), or a NUL character, which PostgreSQL refuses in any
text it is given. Those come from stale bookmarks and edited addresses;
they get the same redirect instead of a server error. Likewise a posted selection of
rows holding a value that is no id of the model (``not-a-uuid`` for a run) is refused
with a message before the action's query would raise.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

__all__ = ["SafeChangelistMixin"]

# What a filter value out of the database's or Python's range raises when the query runs.
OUT_OF_RANGE = (OverflowError, ValueError)
# A character no text column can hold on PostgreSQL: a filter on it names no row anywhere.
NUL = "\x00"


class SafeChangelistMixin:
    """A ``ModelAdmin`` whose changelist refuses out-of-range filter values as Django
    refuses unknown ones (a redirect to the unfiltered list with ``?e=1``), and
    selections that are not ids with a message."""

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        if any(NUL in text for key, values in request.GET.lists() for text in (key, *values)):
            # PostgreSQL refuses the query outright (SQLite would answer it, matching nothing).
            raise IncorrectLookupParameters("a filter value holds a NUL character")
        try:
            # The changelist counts and slices its rows when it is made, so the query runs here.
            return super().get_changelist_instance(request)  # type: ignore[misc]
        except OUT_OF_RANGE as error:
            raise IncorrectLookupParameters(error) from error

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        key = self.model._meta.pk  # type: ignore[attr-defined]
        try:
            for value in request.POST.getlist(ACTION_CHECKBOX_NAME):
                key.to_python(value)
        except ValidationError:
            self.message_user(  # type: ignore[attr-defined]
                request,
                "The selection holds something that is not the id of a row (an old page or "
                "an edited form?); nothing was done. Select the rows again.",
                messages.WARNING,
            )
            return None
        # Django 6.1 added ``action_location``: passed on as given, whatever comes next.
        return super().response_action(request, queryset, *args, **kwargs)  # type: ignore[misc]
