"""The API's long polls: the ``wait`` query parameter, and views that hold no transaction.

``GET /api/runs/{id}/?wait=S`` (and the event and frame cursors) answer as soon as what
the client waits for has committed, or after ``S`` seconds with the current state. The
waiting itself is :func:`workflows.queries.long_poll.long_poll`; this module is the HTTP
side every such endpoint shares:

- :func:`wait_seconds` reads ``wait``: a number of seconds from 0 to :data:`MAX_WAIT`;
  anything else is a 400 ``validation_error`` naming ``wait``. Absent, 0: no waiting.
- :func:`checked_query` reads the rest of such an endpoint's query string through a
  serializer: a 400 ``validation_error`` naming the bad parameter.
- :func:`without_request_transaction` marks a view so that ``ATOMIC_REQUESTS`` does not
  wrap it in a transaction: a long poll must not hold one (its snapshot on SQLite would
  never see the commit it waits for; on PostgreSQL it would pin a connection
  ``idle in transaction`` for up to a minute). Every write the viewset's other actions
  make runs in the engine's own transactions, so they lose nothing by it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connections
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.viewsets import ViewSetMixin

from workflows.api.errors import APIError

# The longest wait a request may ask for, in seconds: past it proxies and clients time out.
MAX_WAIT = 60.0

WAIT_PARAMETER = OpenApiParameter(
    "wait",
    OpenApiTypes.NUMBER,
    OpenApiParameter.QUERY,
    description=(
        f"long poll: answer as soon as there is something new, or after this many seconds "
        f"(0 to {MAX_WAIT:g}; default 0, answer at once)"
    ),
)

V = TypeVar("V", bound=Callable[..., Any])


def wait_seconds(request: Request) -> float:
    """The request's ``wait`` in seconds (0 when absent); a 400 naming ``wait`` when it
    is not a number from 0 to :data:`MAX_WAIT`."""
    raw = request.query_params.get("wait")
    if raw is None:
        return 0.0
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= MAX_WAIT:  # also refuses nan and inf
        raise APIError(
            400,
            "validation_error",
            "the request is not valid; see details",
            {"wait": [f"a number of seconds from 0 to {MAX_WAIT:g}"]},
        )
    return seconds


def checked_query(
    request: Request, serializer_class: type[serializers.Serializer]
) -> dict[str, Any]:
    """The query parameters ``serializer_class`` declares, validated (others ignored);
    a 400 ``validation_error`` naming the first bad one."""
    fields = serializer_class().fields
    query = serializer_class(
        data={name: value for name, value in request.query_params.items() if name in fields}
    )
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


def without_request_transaction(view: V) -> V:
    """``view`` exempt from ``ATOMIC_REQUESTS`` on every database (see the module)."""
    view._non_atomic_requests = {alias for alias in connections}  # type: ignore[attr-defined]
    return view


class LongPollViews(ViewSetMixin):
    """A viewset mixin (listed before the viewset's base): the actions named in
    ``long_poll_actions`` hold no request transaction (:func:`without_request_transaction`).

    DRF builds one Django view per route from ``as_view(actions)``; ``ATOMIC_REQUESTS``
    looks at that view, so the mark goes there, on the routes serving those actions.
    """

    long_poll_actions: frozenset[str] = frozenset()

    @classmethod
    def as_view(cls, actions: dict[str, Any] | None = None, **initkwargs: Any) -> Any:
        view = super().as_view(actions, **initkwargs)
        if actions and cls.long_poll_actions & set(actions.values()):
            without_request_transaction(view)
        return view
