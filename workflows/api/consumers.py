"""Event consumers over HTTP: list, create, read and delete them.

``GET /events/consumers/`` lists every consumer with its position (``cursor``) and lag;
``GET /events/consumers/{name}/`` is one of them (404 ``consumer_not_found``). Both need
``workflows.view_run``, as reading events does. ``POST /events/consumers/`` with
``{"name"}`` creates one at the start of the history (201; 200 with the same body when it
existed already, so of racing creates exactly one gets 201), reading only the events of
``workflows`` and ``kinds`` (event types) when the body lists them (400 naming the field
for a blank name or an unknown type, or for an existing name with another filter), and
``DELETE /events/consumers/{name}/`` deletes one (200, the consumer as it was): both need
``workflows.manage_consumers``. Reading events (``GET /events/?consumer=``) never
creates a consumer (:mod:`workflows.api.events`).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.base import FlowsiteAPIView
from workflows.api.errors import APIError, error_responses
from workflows.api.permissions import CanManageConsumers, CanViewRuns
from workflows.api.schema import created_or_repeated
from workflows.api.strict import StrictCharField, StrictSerializer
from workflows.errors import ConsumerNotFound, InvalidInput
from workflows.queries.consumers import ConsumerLag, consumer_lag, consumer_lags
from workflows.queries.event_cursor import encode_cursor
from workflows.services.consumers import create_consumer, delete_consumer

__all__ = ["ConsumerView", "ConsumersView"]


class ConsumerSerializer(serializers.Serializer):
    name = serializers.CharField()
    cursor = serializers.CharField(help_text="the consumer's acknowledged position")
    lag = serializers.IntegerField(help_text="events after the position, not yet acknowledged")
    acked_at = serializers.DateTimeField(allow_null=True, help_text="the last acknowledgement")
    created_at = serializers.DateTimeField()
    workflows = serializers.ListField(
        child=serializers.CharField(), help_text="the workflows it reads ([]: every one)"
    )
    kinds = serializers.ListField(
        child=serializers.CharField(), help_text="the event types it reads ([]: every one)"
    )


class ConsumerListSerializer(serializers.Serializer):
    results = ConsumerSerializer(many=True)


class CreateConsumerSerializer(StrictSerializer):
    name = StrictCharField(max_length=200, help_text="the consumer's name")
    workflows = serializers.ListField(
        child=StrictCharField(allow_blank=True),
        required=False,
        default=list,
        help_text="read only the events of runs of these workflows (names)",
    )
    kinds = serializers.ListField(
        child=StrictCharField(allow_blank=True),
        required=False,
        default=list,
        help_text="read only the events of these types (e.g. run.completed)",
    )


def _as_dict(consumer: ConsumerLag) -> dict[str, Any]:
    return {
        "name": consumer.name,
        "cursor": encode_cursor(consumer.position),
        "lag": consumer.lag,
        "acked_at": consumer.acked_at,
        "created_at": consumer.created_at,
        "workflows": list(consumer.event_filter.workflows),
        "kinds": list(consumer.event_filter.kinds),
    }


def _found(name: str) -> ConsumerLag:
    consumer = consumer_lag(name)
    if consumer is None:
        raise ConsumerNotFound(f"no event consumer is named {name!r}", consumer=name)
    return consumer


def _writing(request: Request) -> bool:
    return request.method not in ("GET", "HEAD", "OPTIONS")


class _ConsumerAccess(FlowsiteAPIView):
    def get_permissions(self) -> list[BasePermission]:
        return [CanManageConsumers() if _writing(self.request) else CanViewRuns()]


class ConsumersView(_ConsumerAccess):
    """Every event consumer; create one."""

    @extend_schema(
        operation_id="event_consumers_list",
        responses={200: ConsumerListSerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        """Every consumer by name, with its position and lag."""
        return Response({"results": [_as_dict(consumer) for consumer in consumer_lags()]})

    @extend_schema(
        operation_id="event_consumers_create",
        request=CreateConsumerSerializer,
        responses=created_or_repeated(ConsumerSerializer, error_responses(400, 401, 403, 413)),
    )
    def post(self, request: Request) -> Response:
        """Create a consumer at the start of the history (201), or answer the existing
        one unchanged (200)."""
        body = CreateConsumerSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            done = create_consumer(
                data["name"], workflows=data["workflows"], kinds=data["kinds"], user=request.user
            )
        except InvalidInput as exc:
            field = exc.details.get("field", "consumer")
            field = "name" if field == "consumer" else field
            raise APIError(400, "validation_error", exc.message, {field: [exc.message]}) from None
        return Response(_as_dict(_found(done.consumer)), status=201 if done.created else 200)


class ConsumerView(_ConsumerAccess):
    """One event consumer: read it, delete it."""

    @extend_schema(
        operation_id="event_consumers_retrieve",
        responses={200: ConsumerSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, name: str) -> Response:
        """The consumer, its position and lag; 404 ``consumer_not_found``."""
        return Response(_as_dict(_found(name)))

    @extend_schema(
        operation_id="event_consumers_destroy",
        responses={200: ConsumerSerializer, **error_responses(400, 401, 403, 404)},
    )
    def delete(self, request: Request, name: str) -> Response:
        """Delete the consumer (its events stay): the consumer as it was just before;
        404 ``consumer_not_found`` (also to the loser of two racing deletes)."""
        consumer = _found(name)
        try:
            delete_consumer(name, user=request.user)
        except InvalidInput as exc:
            raise APIError(400, "validation_error", exc.message, {"name": [exc.message]}) from None
        return Response(_as_dict(consumer))
