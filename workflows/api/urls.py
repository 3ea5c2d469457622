"""URLs of the API; a project mounts them with ``path("api/", include("workflows.api.urls"))``.

Each resource module contributes its routes to :data:`resources`; ``schema/`` is the
OpenAPI 3 document of those routes and ``docs/`` the Swagger UI, served from the
installed sidecar (no CDN).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.urls import URLPattern, URLResolver, include, path, register_converter
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.views import APIView

from workflows.api.base import JSONRenderer, authentication_classes
from workflows.api.budgets import BudgetViewSet
from workflows.api.bulk_units import BulkUnitsView
from workflows.api.callbacks import CallbackViewSet
from workflows.api.consumers import ConsumersView, ConsumerView
from workflows.api.definitions import DefinitionViewSet
from workflows.api.errors import handle_exception
from workflows.api.events import EventAckView, EventsView
from workflows.api.flows import FlowViewSet
from workflows.api.gates import GateViewSet
from workflows.api.runs import RunViewSet
from workflows.api.schedules import ScheduleViewSet
from workflows.api.signal_tokens import SignalTokenViewSet
from workflows.api.steps import StepViewSet
from workflows.api.waits import WaitsView
from workflows.api.work import WorkViewSet


class ConsumerNameConverter:
    """A consumer's name in a URL: any characters, slashes and line breaks included.

    Django's ``path`` converter stops at a line break (``.``), so a name holding one
    matched no route and got Django's HTML 404 instead of the API's JSON one; a name
    that is not a consumer's is the view's 404, like any other unknown name."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ConsumerNameConverter, "consumer_name")

app_name = "workflows_api"

router = SimpleRouter()
router.register("workflows", DefinitionViewSet, basename="workflow")
router.register("runs", RunViewSet, basename="run")
router.register("steps", StepViewSet, basename="step")
router.register("gates", GateViewSet, basename="gate")
router.register("callbacks", CallbackViewSet, basename="callback")
router.register("budgets", BudgetViewSet, basename="budget")
router.register("flows", FlowViewSet, basename="flow")
router.register("signals", SignalTokenViewSet, basename="signal")
router.register("schedules", ScheduleViewSet, basename="schedule")
router.register("work", WorkViewSet, basename="work")
resources: list[URLPattern | URLResolver] = [
    *router.urls,
    path("waits/", WaitsView.as_view(), name="waits"),
    path("bulk/units/<str:verb>/", BulkUnitsView.as_view(), name="bulk-units"),
    path("events/", EventsView.as_view(), name="events"),
    path("events/ack/", EventAckView.as_view(), name="events-ack"),
    path("events/consumers/", ConsumersView.as_view(), name="event-consumers"),
    path("events/consumers/<consumer_name:name>/", ConsumerView.as_view(), name="event-consumer"),
]


class ServedLikeTheAPI(APIView):
    """Mixed into the schema and docs views: the API's authentication, and its errors
    in the JSON envelope whatever the view renders otherwise (YAML, HTML).

    An ``APIView`` itself, so that its overrides are checked against DRF's own.
    """

    schema = None  # the schema views are not part of the schema

    def get_authenticators(self) -> list[BaseAuthentication]:
        return [auth() for auth in authentication_classes()]

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return handle_exception

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(response, Response) and response.exception:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = "application/json"
        return super().finalize_response(request, response, *args, **kwargs)


class SchemaView(ServedLikeTheAPI, SpectacularAPIView):
    """The OpenAPI document of the API's resources, at the prefix the project mounted
    them under (read from this view's own URL), and nothing else of the project."""

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        prefix = request.path[: -len("schema/")].lstrip("/")
        self.patterns = [path(prefix, include((resources, app_name)))]
        return super().get(request, *args, **kwargs)


class DocsView(ServedLikeTheAPI, SpectacularSwaggerView):
    """Swagger UI for the schema above, its assets served by the project (no CDN)."""


urlpatterns = [
    *resources,
    path("schema/", SchemaView.as_view(api_version="1"), name="schema"),
    path("docs/", DocsView.as_view(url_name="workflows_api:schema"), name="docs"),
]
