"""``/workflows/``: the registered definitions, their versions and graphs."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.base import FlowsiteViewSet
from workflows.api.errors import APIError, error_responses
from workflows.api.permissions import CanViewRuns
from workflows.definitions import Workflow, registry


class DefinitionSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField()
    versions = serializers.ListField(child=serializers.IntegerField())
    graph = serializers.DictField(help_text="the definition's snapshot: nodes and edges")
    input_example = serializers.DictField(
        allow_null=True,
        help_text="an input the workflow accepts, as its author wrote it (null: none given); "
        "a starting point for POST /api/runs/",
    )

    @staticmethod
    def of(workflow: type[Workflow], versions: list[int]) -> dict[str, Any]:
        return {
            "name": workflow.name,
            "version": workflow.version,
            "versions": versions,
            "graph": workflow.snapshot(),
            "input_example": workflow.input_example,
        }


def _latest_by_name() -> dict[str, tuple[type[Workflow], list[int]]]:
    found: dict[str, list[type[Workflow]]] = {}
    for workflow in registry.all():
        found.setdefault(workflow.name, []).append(workflow)
    return {
        name: (max(versions, key=lambda w: w.version), sorted(w.version for w in versions))
        for name, versions in sorted(found.items())
    }


class DefinitionViewSet(FlowsiteViewSet):
    """Registered workflow definitions (the latest version of each, and its versions)."""

    permission_classes = [CanViewRuns]
    serializer_class = DefinitionSerializer
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"

    @extend_schema(responses={200: DefinitionSerializer(many=True), **error_responses(401, 403)})
    def list(self, request: Request) -> Response:
        return Response([DefinitionSerializer.of(*entry) for entry in _latest_by_name().values()])

    @extend_schema(responses={200: DefinitionSerializer, **error_responses(401, 403, 404)})
    def retrieve(self, request: Request, name: str) -> Response:
        entry = _latest_by_name().get(name)
        if entry is None:
            raise APIError(404, "workflow_not_found", f"no workflow named {name!r} is registered")
        return Response(DefinitionSerializer.of(*entry))
