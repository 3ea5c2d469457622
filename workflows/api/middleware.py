"""Requests Django refuses to read, answered in the API's error envelope.

Django raises ``SuspiciousOperation`` lazily, where a request is first read: more than
``DATA_UPLOAD_MAX_NUMBER_FIELDS`` query parameters when ``request.GET`` is parsed, a
disallowed ``Host`` when ``get_host()`` is called. Inside the API's views the error
handler answers them; read earlier (by a project's middleware, or by Django's
``CommonMiddleware``) they become Django's HTML 400, and with ``DEBUG`` on its debug
page, which takes seconds to render a thousand parameters. This middleware, first in
``MIDDLEWARE``, reads both for requests under the API's prefix before anything else
does, and answers a refusal at once in the envelope.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import NoReverseMatch, reverse

from workflows.api.errors import suspicious


def api_prefix() -> str | None:
    """The path the project mounted the API at (``/api/``), or ``None`` if it did not
    mount it under its namespace ``workflows_api``."""
    try:
        return reverse("workflows_api:schema")[: -len("schema/")]
    except NoReverseMatch:
        return None


class SuspiciousRequestMiddleware:
    """Answer a request under the API that Django will not read with a 4xx envelope."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        prefix = api_prefix()
        if prefix is not None and request.path.startswith(prefix):
            try:
                request.get_host()
                request.GET  # noqa: B018 - parsed (and cached) now, or refused now
            except SuspiciousOperation as exc:
                status_code, body = suspicious(exc)
                return JsonResponse(body, status=status_code)
        return self.get_response(request)
