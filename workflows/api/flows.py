"""``/flows/``: build a flow of runs while it runs, read its graph, seal it, cancel it.

Every write goes through :mod:`workflows.services.flows` with the caller as the actor;
who may call each is the verb table (:data:`workflows.services.access.VERBS`): building
a flow (create, members, edges, joins, seal) is starting runs, cancelling it is
operating them, reading it is viewing runs.

Creating a flow, adding a member and staging an edge are idempotent (the flow's
``key``, the member's name, the edge's two ends): 201 for the request that created it,
200 with the same flow, run or revision on a repeat. Each learns it from the engine's
insert (``create_flow_once``, ``add_to_flow_once``, ``add_dependency_once``), not from
a read before it: of requests racing with one new key, member or edge exactly one says
201. An edge staged against a stale
``expected_revision`` is 409 ``stale_revision`` with the current ``revision`` in its
details, so the client can read the graph again and decide anew.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar
from uuid import UUID

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.base import FlowsiteViewSet
from workflows.api.errors import APIError, error_responses
from workflows.api.examples import START_DISPATCH, START_ORDER, request_examples
from workflows.api.filters import any_status
from workflows.api.ids import flow_pk
from workflows.api.pagination import NewestFirst
from workflows.api.permissions import CanBuildFlows, CanOperateRuns, CanViewRuns
from workflows.api.runs import run_detail, validated
from workflows.api.schema import created_or_repeated
from workflows.api.serializers_flows import (
    AddEdgeSerializer,
    AddMemberSerializer,
    CancelFlowSerializer,
    CreateFlowSerializer,
    FlowCancelledSerializer,
    FlowDetailSerializer,
    FlowSerializer,
    RevisionSerializer,
    SetJoinSerializer,
)
from workflows.api.serializers_runs import EmptySerializer, RunDetailSerializer
from workflows.errors import DefinitionMissing, InvalidTransition
from workflows.models import Flow
from workflows.queries.flows import flow_graph, get_flow, list_flows
from workflows.services import flows as flow_verbs
from workflows.services.access import VERBS, Access
from workflows.status import FlowStatus

if TYPE_CHECKING:
    from rest_framework.permissions import _SupportsHasPermission

T = TypeVar("T")

# Request bodies for the schema, runnable in this order against the demo project.
CREATE_FLOW = {"name": "orders of 6 January", "key": "orders-2025-01-06"}
ADD_ORDER = {"workflow": "order_fulfilment", "member": "order", "input": START_ORDER["input"]}
ADD_DISPATCH = {
    "workflow": "warehouse_dispatch",
    "member": "dispatch",
    "input": START_DISPATCH["input"],
    "after": ["order"],
    "join": "all",
}
ADD_IMPORT = {"workflow": "flaky_import", "member": "import", "input": {"rows": 25}}
ADD_EDGE = {"upstream": "import", "downstream": "dispatch", "expected_revision": 3}
SET_JOIN = {"member": "dispatch", "join": "any"}
CANCEL_FLOW = {"policy": "cancel_pending", "reason": "orders moved to the next batch"}

_PERMISSION_OF: dict[Access, type[BasePermission]] = {
    permission.access: permission for permission in (CanViewRuns, CanBuildFlows, CanOperateRuns)
}


def allowed_to(verb: str) -> list[type[BasePermission]]:
    """The permission class of ``verb``'s row in the verb table."""
    return [_PERMISSION_OF[VERBS[verb]]]


def flow_detail(flow: Flow | UUID, *, status: int = 200) -> Response:
    """The flow's graph: what the flow endpoints answer."""
    return Response(FlowDetailSerializer(flow_graph(flow).as_dict()).data, status=status)


def refused_as_invalid_state(verb: Callable[[], T]) -> T:
    """Call ``verb``; a flow whose status refuses it (sealing a cancelled flow,
    cancelling an ended one) is 409 ``invalid_state``, as a run's state refusing a verb
    is."""
    try:
        return verb()
    except InvalidTransition as exc:
        raise APIError(409, "invalid_state", exc.message, exc.details) from exc


class FlowFilter(filters.FilterSet):
    status = any_status(FlowStatus.choices)

    class Meta:
        model = Flow
        fields = ["status"]


# The errors of a change to a flow's graph: bad body, no credential or permission, no
# such flow (or workflow), a change the graph or an idempotency key refuses, too large.
_CHANGE_ERRORS = error_responses(400, 401, 403, 404, 409, 413)


@extend_schema_view(
    list=extend_schema(
        responses={200: FlowSerializer(many=True), **error_responses(400, 401, 403, 404)}
    )
)
class FlowViewSet(mixins.ListModelMixin, FlowsiteViewSet):
    """Flows: create, list, read the graph, add members, edges and joins, seal, cancel."""

    permission_classes = [CanViewRuns]
    serializer_class = FlowSerializer
    pagination_class = NewestFirst
    filter_backends = [DjangoFilterBackend]
    filterset_class = FlowFilter
    # Anything up to the next slash, so that a malformed id is a 404 flow_not_found.
    lookup_value_regex = r"[^/]+"

    def get_queryset(self) -> QuerySet[Flow]:
        return list_flows()

    def get_permissions(self) -> Sequence[_SupportsHasPermission]:
        if self.action == "create":
            return [permission() for permission in allowed_to("create_flow")]
        return super().get_permissions()

    @extend_schema(
        request=CreateFlowSerializer,
        examples=request_examples(("Create a flow", CREATE_FLOW)),
        responses=created_or_repeated(FlowDetailSerializer, _CHANGE_ERRORS),
    )
    def create(self, request: Request) -> Response:
        """Create an open flow; with a ``key`` seen before, that same flow (200)."""
        body = validated(request.data, CreateFlowSerializer)
        made = flow_verbs.create_flow_once(
            body["name"], key=body.get("key"), user=request.user, tags=body.get("tags")
        )
        # 201 only for the request whose insert created the flow, even under a race.
        return flow_detail(made.value, status=201 if made.created else 200)

    @extend_schema(responses={200: FlowDetailSerializer, **error_responses(401, 403, 404)})
    def retrieve(self, request: Request, pk: str) -> Response:
        """The flow's members (run, workflow, status, join, upstream), edges and revision."""
        return flow_detail(get_flow(flow_pk(pk)))

    @extend_schema(
        request=AddMemberSerializer,
        examples=request_examples(
            ("Add a member that starts at once", ADD_ORDER),
            ("Add a member that waits for another", ADD_DISPATCH),
            ("Add a third member", ADD_IMPORT),
        ),
        responses=created_or_repeated(RunDetailSerializer, _CHANGE_ERRORS),
    )
    @action(detail=True, methods=["post"], permission_classes=allowed_to("add_to_flow"))
    def members(self, request: Request, pk: str) -> Response:
        """Add a run of a workflow as a member; it is blocked until its join is satisfied."""
        flow = get_flow(flow_pk(pk))
        body = validated(request.data, AddMemberSerializer)
        try:
            added = flow_verbs.add_to_flow_once(
                flow.pk,
                body["workflow"],
                body["input"],
                member=body["member"],
                after=body["after"],
                join=body["join"],
                user=request.user,
                tags=body.get("tags"),
            )
        except DefinitionMissing as exc:
            raise APIError(404, "workflow_not_found", exc.message, exc.details) from exc
        # 201 only for the request whose insert created the member, even under a race.
        return run_detail(added.value.pk, status=201 if added.created else 200)

    @extend_schema(
        request=AddEdgeSerializer,
        examples=request_examples(("Stage an edge at the revision read", ADD_EDGE)),
        responses=created_or_repeated(RevisionSerializer, _CHANGE_ERRORS),
    )
    @action(detail=True, methods=["post"], permission_classes=allowed_to("add_dependency"))
    def edges(self, request: Request, pk: str) -> Response:
        """Stage the edge upstream → downstream; the answer is the flow's new revision."""
        flow = get_flow(flow_pk(pk))
        body = validated(request.data, AddEdgeSerializer)
        staged = flow_verbs.add_dependency_once(
            flow.pk,
            body["upstream"],
            body["downstream"],
            expected_revision=body.get("expected_revision"),
            user=request.user,
        )
        answer = RevisionSerializer({"flow": flow.pk, "revision": staged.value}).data
        # 201 only for the request whose insert created the edge, even under a race.
        return Response(answer, status=201 if staged.created else 200)

    @extend_schema(
        request=SetJoinSerializer,
        examples=request_examples(("Start once any upstream member completed", SET_JOIN)),
        responses={200: RevisionSerializer, **_CHANGE_ERRORS},
    )
    @action(detail=True, methods=["post"], permission_classes=allowed_to("set_join"))
    def joins(self, request: Request, pk: str) -> Response:
        """Change a blocked member's join; the answer is the flow's new revision."""
        flow = get_flow(flow_pk(pk))
        body = validated(request.data, SetJoinSerializer)
        revision = flow_verbs.set_join(flow.pk, body["member"], body["join"], user=request.user)
        return Response(RevisionSerializer({"flow": flow.pk, "revision": revision}).data)

    @extend_schema(request=EmptySerializer, responses={200: FlowDetailSerializer, **_CHANGE_ERRORS})
    @action(detail=True, methods=["post"], permission_classes=allowed_to("seal_flow"))
    def seal(self, request: Request, pk: str) -> Response:
        """No more members or edges: the flow ends once every member has."""
        flow = get_flow(flow_pk(pk))
        validated(request.data, EmptySerializer)
        refused_as_invalid_state(lambda: flow_verbs.seal_flow(flow.pk, user=request.user))
        return flow_detail(flow.pk)

    @extend_schema(
        request=CancelFlowSerializer,
        examples=request_examples(("Cancel the members not started", CANCEL_FLOW)),
        responses={200: FlowCancelledSerializer, **_CHANGE_ERRORS},
    )
    @action(detail=True, methods=["post"], permission_classes=allowed_to("cancel_flow"))
    def cancel(self, request: Request, pk: str) -> Response:
        """Close the flow and cancel its members by policy; a repeat changes nothing more."""
        flow = get_flow(flow_pk(pk))
        body = validated(request.data, CancelFlowSerializer)
        cancellation = refused_as_invalid_state(
            lambda: flow_verbs.cancel_flow(
                flow.pk, body["policy"], reason=body["reason"], user=request.user
            )
        )
        graph = flow_graph(flow.pk).as_dict()
        return Response(FlowCancelledSerializer({**cancellation.as_dict(), "flow": graph}).data)
