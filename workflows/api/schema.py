"""The OpenAPI schema says what the API enforces: closed request bodies, every error.

drf-spectacular describes a serializer's fields but not that a
:class:`~workflows.api.strict.StrictSerializer` refuses any other field, and an
operation's responses as its view declares them, without the errors every view shares
(a body that is not JSON, an ``Accept`` it cannot serve, a busy database). This schema
class adds both, so that a client generated from the document, and the fuzzing test
checking responses against it, know them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from workflows.api.errors import ErrorSerializer
from workflows.api.strict import StrictSerializer

if TYPE_CHECKING:
    from rest_framework.decorators import ViewSetAction

View = TypeVar("View", bound=Callable[..., Response])

# Errors any operation may answer, whatever it declares: (status, when).
_EVERY_OPERATION = {
    400: "validation_error, or too_many_parameters: a query the API does not read",
    405: "method_not_allowed: another method than the path's",
    406: "not_acceptable: an Accept header that does not take application/json",
    503: "database_busy: the database stayed locked; retry after Retry-After",
}
# And those of an operation that reads a body.
_WITH_BODY = {
    413: "payload_too_large: the body is larger than the API reads",
    415: "unsupported_media_type: a body that is not application/json",
}


class FlowsiteAutoSchema(AutoSchema):
    """drf-spectacular's schema, with closed request bodies and the shared errors."""

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictSerializer):
            schema["additionalProperties"] = False
            for name, field in serializer.fields.items():
                # DRF refuses an empty list where allow_empty is off; spectacular omits it.
                if isinstance(field, serializers.ListField) and not field.allow_empty:
                    schema["properties"][name]["minItems"] = 1
        return schema

    def _get_response_bodies(self, direction: Direction = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        shared = {**_EVERY_OPERATION, **(_WITH_BODY if self.method in ("POST", "PATCH") else {})}
        if (
            self.method == "GET"
            and self._is_list_view()
            and isinstance(self.view, GenericAPIView)
            and self.view.pagination_class
        ):
            shared[404] = "not_found: a cursor the server did not issue"
        for status_code, when in shared.items():
            if str(status_code) not in responses:
                response = OpenApiResponse(ErrorSerializer, description=when)
                responses[str(status_code)] = self._get_response_for_code(
                    response, str(status_code), direction=direction
                )
        return responses


def created_or_repeated(serializer: Any, errors: dict[int, OpenApiResponse]) -> dict[int, Any]:
    """``extend_schema(responses=...)`` of an idempotent creation: ``serializer`` with 201
    when the request created it, 200 for a repeat that found it, and ``errors``."""
    return {201: serializer, 200: serializer, **errors}


def documented_action(
    schema: dict[str, Any], **route: Any
) -> Callable[[View], ViewSetAction[View]]:
    """A viewset's extra action and its operation at once: ``@extend_schema(**schema)``
    over ``@action(**route)``, for actions that share both (the gate verbs, say)."""

    def decorate(view: View) -> ViewSetAction[View]:
        return extend_schema(**schema)(action(**route)(view))

    return decorate
