"""Cursor pagination: stable pages over tables that grow while they are read.

DRF's ``CursorPagination`` trusts the position inside a cursor: a crafted one
(``p=abc`` for a list ordered by time) reaches the database and fails there as a 500.
Here a cursor is signed with the project's secret key for the ordering it pages, so a
cursor the server did not issue (tampered, made up, or issued by a list ordered
another way) is the documented 404 ``not_found`` before any query. ``page_size`` is a
whole number in range or a 400 naming it, never silently replaced.
"""

from __future__ import annotations

from typing import Any, cast

from django.core import signing
from rest_framework import exceptions
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.utils.urls import replace_query_param

from workflows.api.ids import integer_id


class SignedCursorPagination(CursorPagination):
    """Cursors signed for this pagination's ordering; ``page_size`` checked, not clamped."""

    # Each pagination here sets both, so a page always has a size and a bound.
    page_size: int
    max_page_size: int
    page_size_query_param = "page_size"
    invalid_cursor_message = "invalid cursor: follow the next and previous links as given"

    def _salt(self) -> str:
        # A cursor holds a position in the first ordering field: one issued for another
        # ordering may hold a value of another type, so it must not verify here.
        return f"workflows.api.cursor:{','.join(self.ordering)}"

    def encode_cursor(self, cursor: Cursor) -> str:
        signed = signing.dumps(
            [cursor.offset, cursor.reverse, cursor.position], salt=self._salt(), compress=True
        )
        # paginate_queryset sets base_url before any cursor is encoded.
        base_url = cast(str, self.base_url)
        return replace_query_param(base_url, self.cursor_query_param, signed)

    def decode_cursor(self, request: Request) -> Cursor | None:
        signed = request.query_params.get(self.cursor_query_param)
        if signed is None:
            return None
        try:
            offset, reverse, position = signing.loads(signed, salt=self._salt())
        except (signing.BadSignature, TypeError, ValueError):
            raise exceptions.NotFound(self.invalid_cursor_message) from None
        return Cursor(offset=offset, reverse=reverse, position=position)

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        size = integer_id(raw)
        if size is None or not 1 <= size <= self.max_page_size:
            raise exceptions.ValidationError(
                {self.page_size_query_param: [f"a whole number from 1 to {self.max_page_size}"]}
            )
        return size

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
                parameter["description"] = (
                    f"rows per page, 1 to {self.max_page_size} (default {self.page_size}); "
                    "another value is a 400"
                )
            elif parameter["name"] == self.cursor_query_param:
                parameter["description"] = (
                    "the cursor of a next or previous link, as given; any other is a 404"
                )
        return parameters


class NewestFirst(SignedCursorPagination):
    """Runs newest first, by an opaque cursor (no ``COUNT(*)`` over a large table)."""

    ordering = ("-created_at", "-id")
    page_size = 50
    max_page_size = 500


class InSequence(SignedCursorPagination):
    """Rows in the order they were made (by id): a run's events, a fan-out's items, budgets."""

    ordering = ("id",)
    page_size = 100
    max_page_size = 1000


class LongestWaitingFirst(SignedCursorPagination):
    """Gates in the order they started waiting (``waiting_since``, annotated by the view)."""

    ordering = ("waiting_since", "id")
    page_size = 50
    max_page_size = 500
