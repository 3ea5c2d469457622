"""Events in commit order over HTTP: a run's history after ``after_seq``, and consumers.

``GET /runs/{id}/events/?after_seq=C&page_size=N&wait=S`` (an action of the runs
viewset, answered by :func:`run_events_page`): the run's events after the event ``C``
(the ``seq`` of the last one the client received; 0 or absent: from the start), in
commit order (:mod:`workflows.queries.event_cursor`), so a poller that always asks
after the last ``seq`` it got never skips an event. ``next`` is the same request after
this page's last event. A ``C`` that is no event of this run is a 400 naming
``after_seq``.

``GET /events/?consumer=NAME&limit=N&wait=S`` hands consumer ``NAME`` the events after
its acknowledged position, each with a ``cursor``; ``POST /events/ack/`` with
``{"consumer", "cursor"}`` moves the position (:mod:`workflows.services.consumers`).
Reading needs ``workflows.view_run``, acknowledging ``workflows.operate_run``. Reading
writes nothing: an unknown consumer is a 404 ``consumer_not_found``; a consumer is
created by ``POST /events/consumers/`` (:mod:`workflows.api.consumers`) or by the first
acknowledgement of a caller who also holds ``workflows.manage_consumers``.

With ``wait=S`` (0 to 60 s) an empty answer waits until an event commits, or ``S``
seconds; the request holds no database transaction meanwhile
(:mod:`workflows.api.long_poll`).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from workflows.api.base import FlowsiteAPIView
from workflows.api.errors import APIError, error_responses
from workflows.api.ids import integer_id
from workflows.api.long_poll import (
    WAIT_PARAMETER,
    checked_query,
    timed_out,
    timed_out_field,
    wait_seconds,
    waiting,
    without_request_transaction,
)
from workflows.api.pagination import InSequence
from workflows.api.permissions import CanOperateRuns, CanViewRuns
from workflows.api.serializers_runs import EventSerializer
from workflows.api.strict import StrictCharField, StrictSerializer
from workflows.errors import InvalidInput
from workflows.queries.event_waits import wait_for_events
from workflows.services.access import MANAGE_EVENT_CONSUMERS
from workflows.services.consumers import MAX_CONSUME_LIMIT, ack, consume

RUN_EVENT_PARAMETERS = [
    OpenApiParameter(
        "after_seq",
        OpenApiTypes.INT,
        description="only events after this seq (the last one the client received; "
        "0 or absent: from the start); a seq of another run is a 400",
    ),
    OpenApiParameter(
        "page_size",
        OpenApiTypes.INT,
        description=f"events per page, 1 to {InSequence.max_page_size} "
        f"(default {InSequence.page_size}); another value is a 400",
    ),
    WAIT_PARAMETER,
]


class EventPageSerializer(serializers.Serializer):
    next = serializers.URLField(
        allow_null=True, help_text="the same request after this page's last event; null: none"
    )
    previous = serializers.URLField(allow_null=True, help_text="always null: pages go forward")
    results = EventSerializer(many=True)
    timed_out = timed_out_field()


def _as_validation_error(exc: InvalidInput) -> APIError:
    field = exc.details.get("field", "non_field_errors")
    return APIError(400, "validation_error", exc.message, {field: [exc.message]})


def _after_seq(request: Request) -> int:
    """``after_seq``: a seq as the API hands them out (ASCII digits), or 0 when absent."""
    raw = request.query_params.get("after_seq")
    seq = 0 if raw is None else integer_id(raw)
    if seq is None:
        raise APIError(
            400,
            "validation_error",
            "the request is not valid; see details",
            {"after_seq": ["the seq of the last event received (a whole number), or 0"]},
        )
    return seq


def run_events_page(request: Request, run_id: UUID) -> Response:
    """The answer of ``GET /runs/{id}/events/`` (see the module)."""
    after = _after_seq(request)
    # The paged lists' own check: a whole number in range, or a 400 naming page_size.
    page_size = InSequence().get_page_size(request)
    try:
        with waiting(request) as timeout:
            events = wait_for_events(run_id, after=after, timeout=timeout, limit=page_size)
    except InvalidInput as exc:
        raise _as_validation_error(exc) from None
    next_url = None
    if len(events) == page_size:
        next_url = replace_query_param(request.build_absolute_uri(), "after_seq", events[-1].pk)
    return Response(
        {
            "next": next_url,
            "previous": None,
            "results": EventSerializer(events, many=True).data,
            "timed_out": timed_out(timeout, bool(events)),
        }
    )


class ConsumeQuerySerializer(serializers.Serializer):
    consumer = StrictCharField(max_length=200)
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_CONSUME_LIMIT, default=100
    )


class ConsumedEventSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="the event's id (its seq in its run's history)")
    cursor = serializers.CharField(help_text="acknowledge it to move past this event")
    run = serializers.UUIDField(allow_null=True)
    step = serializers.CharField(allow_null=True, help_text="the step's name, if about a step")
    type = serializers.CharField()
    payload = serializers.JSONField()
    created_at = serializers.DateTimeField()


class ConsumedSerializer(serializers.Serializer):
    consumer = serializers.CharField()
    events = ConsumedEventSerializer(many=True)
    timed_out = timed_out_field()


class AckSerializer(StrictSerializer):
    consumer = StrictCharField(max_length=200)
    cursor = StrictCharField(max_length=200)


class AckResultSerializer(serializers.Serializer):
    consumer = serializers.CharField()
    cursor = serializers.CharField(help_text="the consumer's position now")
    version = serializers.IntegerField()
    moved = serializers.BooleanField(
        help_text="false: the consumer was already at or past this cursor; nothing changed"
    )


class EventsView(FlowsiteAPIView):
    """Events of every run in commit order, for a named consumer."""

    permission_classes = [CanViewRuns]

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        """The view, exempt from ``ATOMIC_REQUESTS``: a long poll holds no transaction."""
        return without_request_transaction(super().as_view(**initkwargs))

    @extend_schema(
        operation_id="events_consume",
        parameters=[
            OpenApiParameter(
                "consumer",
                OpenApiTypes.STR,
                required=True,
                description="the consumer's name (POST /api/events/consumers/ creates "
                "one); an unknown name is a 404",
            ),
            OpenApiParameter(
                "limit",
                OpenApiTypes.INT,
                description=f"events at most, 1 to {MAX_CONSUME_LIMIT} (default 100)",
            ),
            WAIT_PARAMETER,
        ],
        responses={200: ConsumedSerializer, **error_responses(400, 401, 403, 404, 429)},
    )
    def get(self, request: Request) -> Response:
        """The events after the consumer's acknowledged position: the same ones again
        until it acknowledges them."""
        query = checked_query(request, ConsumeQuerySerializer)
        wait_seconds(request)  # a bad wait is a 400 before the consumer is looked up
        try:
            with waiting(request) as timeout:
                events = consume(query["consumer"], query["limit"], wait=timeout, create=False)
        except InvalidInput as exc:
            raise _as_validation_error(exc) from None
        return Response(
            {
                "consumer": query["consumer"],
                "events": [event.as_dict() for event in events],
                "timed_out": timed_out(timeout, bool(events)),
            }
        )


class EventAckView(FlowsiteAPIView):
    """Acknowledge a consumer's events up to a cursor."""

    permission_classes = [CanOperateRuns]

    @extend_schema(
        operation_id="events_ack",
        request=AckSerializer,
        responses={200: AckResultSerializer, **error_responses(400, 401, 403, 404, 413)},
    )
    def post(self, request: Request) -> Response:
        """Move the consumer past the event the cursor came with; forward only. An
        unknown consumer is created by it if the caller may manage consumers, else 404."""
        body = AckSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            done = ack(
                body.validated_data["consumer"],
                body.validated_data["cursor"],
                create=MANAGE_EVENT_CONSUMERS.allows(request.user),
            )
        except InvalidInput as exc:
            raise _as_validation_error(exc) from None
        return Response(
            {
                "consumer": done.consumer,
                "cursor": done.cursor,
                "version": done.version,
                "moved": done.moved,
            }
        )
