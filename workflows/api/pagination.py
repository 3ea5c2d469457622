"""Cursor pagination: stable pages over tables that grow while they are read."""

from __future__ import annotations

from rest_framework.pagination import CursorPagination


class NewestFirst(CursorPagination):
    """Runs newest first, by an opaque cursor (no ``COUNT(*)`` over a large table)."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class InSequence(CursorPagination):
    """A run's events in the order they happened."""

    ordering = ("id",)
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
