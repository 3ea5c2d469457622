"""``/waits/``: what every run is waiting for (:func:`workflows.queries.waits.pending_waits`).

Gates, signals, callbacks, sleeps, child runs, work held by a limit, blocked flow
members and queued runs, oldest first, each with its run, age and timeout. Reading it
needs ``workflows.view_run``, as for runs. Paged forward by an opaque cursor, like the
other lists (``next``; ``previous`` is always null): one the server did not issue is a
404 ``not_found``; a filter value that does not parse is a 400 naming it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from workflows.api.base import FlowsiteAPIView
from workflows.api.errors import error_responses
from workflows.api.permissions import CanViewRuns
from workflows.api.serializers_runs import MAX_AGE
from workflows.api.strict import StrictCharField
from workflows.errors import InvalidInput
from workflows.queries.waits import MAX_LIMIT, WAIT_CHOICES, WAIT_KINDS, pending_waits
from workflows.status import RunStatus

PAGE_SIZE = 50
INVALID_CURSOR = "invalid cursor: follow the next and previous links as given"


class WaitQuerySerializer(serializers.Serializer):
    """The query string of ``GET /waits/``."""

    kind = serializers.ListField(
        child=serializers.ChoiceField(choices=WAIT_CHOICES), required=False
    )
    workflow = StrictCharField(required=False, max_length=200)
    older_than = serializers.DurationField(
        required=False, min_value=timedelta(0), max_value=MAX_AGE
    )
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_LIMIT, default=PAGE_SIZE
    )
    cursor = serializers.CharField(required=False)


class WaitSerializer(serializers.Serializer):
    """One wait, as :meth:`workflows.queries.waits.Wait.as_dict` gives it."""

    kind = serializers.ChoiceField(choices=WAIT_CHOICES)
    run = serializers.UUIDField()
    workflow = serializers.CharField()
    business_key = serializers.CharField(allow_blank=True)
    run_status = serializers.ChoiceField(choices=RunStatus.choices)
    step = serializers.CharField(allow_null=True, help_text="null for a queued or blocked run")
    step_id = serializers.IntegerField(allow_null=True)
    item = serializers.CharField(allow_null=True, help_text="a held fan-out item's key")
    waits_for = serializers.CharField(
        allow_blank=True,
        help_text="a gate's prompt, a signal's name, 'callback', 'timer', a child run's id, "
        "a limit's key (held), a flow's join (blocked), the run limit (queued)",
    )
    since = serializers.DateTimeField(help_text="when the wait began")
    age_seconds = serializers.FloatField()
    due_at = serializers.DateTimeField(
        allow_null=True, help_text="when the timer that ends the wait fires; null: none"
    )
    deadline = serializers.DateTimeField(allow_null=True, help_text="the run's deadline")
    details = serializers.DictField(help_text="more by kind: attempt, claimed_by, flow, ...")


class WaitPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="the next page; null: the last")
    previous = serializers.URLField(allow_null=True, help_text="always null: pages go forward")
    results = WaitSerializer(many=True)


# The query parameters, as the schema publishes them.
_PARAMETERS = [
    OpenApiParameter(
        "kind",
        OpenApiTypes.STR,
        enum=[kind.value for kind in WAIT_KINDS],
        many=True,
        description="repeat for any of several kinds",
    ),
    OpenApiParameter("workflow", OpenApiTypes.STR, description="the workflow's name"),
    OpenApiParameter(
        "older_than",
        OpenApiTypes.STR,
        description="waits begun at least this long ago: ISO 8601 (P2D, PT30M) or seconds",
    ),
    OpenApiParameter(
        "page_size",
        OpenApiTypes.INT,
        description=f"waits per page, 1 to {MAX_LIMIT} (default {PAGE_SIZE}); "
        "another value is a 400",
    ),
    OpenApiParameter(
        "cursor",
        OpenApiTypes.STR,
        description="the cursor of a next link, as given; any other is a 404",
    ),
]


class WaitsView(FlowsiteAPIView):
    """Every wait across runs, oldest first."""

    permission_classes = [CanViewRuns]

    @extend_schema(
        operation_id="waits_list",
        parameters=_PARAMETERS,
        responses={200: WaitPageSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request) -> Response:
        """Gates, signals, callbacks, polls, sleeps, child runs, work held by a limit,
        blocked flow members and queued runs, each with its run, since when and its
        timeout."""
        query: dict[str, Any] = {
            name: request.query_params.getlist(name) if name == "kind" else value
            for name, value in request.query_params.items()
            if name in WaitQuerySerializer().fields
        }
        body = WaitQuerySerializer(data=query)
        body.is_valid(raise_exception=True)
        options = body.validated_data
        try:
            page = pending_waits(
                kind=options.get("kind") or None,
                workflow=options.get("workflow"),
                older_than=options.get("older_than"),
                limit=options["page_size"],
                cursor=options.get("cursor"),
            )
        except InvalidInput as exc:
            if exc.details.get("field") == "cursor":
                raise exceptions.NotFound(INVALID_CURSOR) from None
            raise
        next_url = (
            replace_query_param(request.build_absolute_uri(), "cursor", page.next_cursor)
            if page.next_cursor
            else None
        )
        return Response(
            {
                "next": next_url,
                "previous": None,
                "results": [wait.as_dict() for wait in page.waits],
            }
        )
