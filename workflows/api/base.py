"""What every view of the API shares: authentication, JSON in and out, the error format.

Set per view rather than through ``REST_FRAMEWORK`` so that mounting the API leaves a
host project's own DRF settings alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from rest_framework import authentication, exceptions, parsers, renderers
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from workflows.api.errors import APIError, handle_exception
from workflows.api.schema import FlowsiteAutoSchema
from workflows.api.throttling import CallbackRateThrottle
from workflows.conf import workflow_settings


class LimitedJSONParser(parsers.JSONParser):
    """JSON bodies up to ``WORKFLOWS["API_MAX_BODY_BYTES"]``; ``NaN`` and ``Infinity``
    (which Python's parser accepts and PostgreSQL refuses) are malformed JSON here."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = workflow_settings.API_MAX_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise APIError(
                413,
                "payload_too_large",
                f"the request body is larger than {limit} bytes",
                {"limit": limit},
            )
        if not raw:
            return {}
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise exceptions.ParseError(f"the request body is not valid JSON: {exc}") from exc
        except RecursionError as exc:  # nesting deeper than the parser follows
            raise exceptions.ParseError("the request body is nested too deeply") from exc


class JSONRenderer(renderers.JSONRenderer):
    """UTF-8 JSON, or ASCII JSON when the data holds a lone surrogate.

    A JSON body may carry ``"\\ud800"``, which Python reads as a string no UTF-8 can
    encode; a validation error that quotes it back (``"\\ud800" is not a valid
    choice``) would then fail to render, as a 500. Escaped, it is valid JSON that
    tells the client what it sent.
    """

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return _ASCIIJSONRenderer().render(data, accepted_media_type, renderer_context)


class _ASCIIJSONRenderer(renderers.JSONRenderer):
    """JSON with every non-ASCII character escaped, a lone surrogate included."""

    ensure_ascii = True


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def authentication_classes() -> list[type[authentication.BaseAuthentication]]:
    """Token authentication (first, so a missing credential is a 401) when the project
    installs ``rest_framework.authtoken``; session authentication always."""
    classes: list[type[authentication.BaseAuthentication]] = []
    if "rest_framework.authtoken" in settings.INSTALLED_APPS:
        classes.append(authentication.TokenAuthentication)
    classes.append(authentication.SessionAuthentication)
    return classes


class FlowsiteAPI(APIView):
    """Mixed into every view: the shared configuration and the one error format.

    An ``APIView`` itself, so that its settings and overrides are checked against DRF's;
    listed first among a view's bases, it still comes before DRF's classes.
    """

    permission_classes = [IsAuthenticated]
    # No OPTIONS metadata: the OpenAPI document describes every operation, and DRF's
    # metadata introspection fails on views whose serializer depends on the action.
    metadata_class = None
    parser_classes = [LimitedJSONParser]
    renderer_classes = [JSONRenderer]
    schema = FlowsiteAutoSchema()

    def get_authenticators(self) -> list[authentication.BaseAuthentication]:
        return [auth() for auth in authentication_classes()]

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return handle_exception


class FlowsiteAPIView(FlowsiteAPI):
    """A plain endpoint of the API."""


class FlowsiteViewSet(FlowsiteAPI, GenericViewSet):
    """A resource of the API (list, retrieve and actions)."""


class TokenViewSet(FlowsiteViewSet):
    """Endpoints anyone may call, authorised by the signed token in the body alone (the
    callbacks, signals by token): throttled per client address (one budget for all)."""

    permission_classes = [AllowAny]
    throttle_classes = [CallbackRateThrottle]

    def get_authenticators(self) -> list[authentication.BaseAuthentication]:
        # No session authentication, hence no CSRF check: a browser's cookie is ignored.
        return []
