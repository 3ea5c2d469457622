"""``/gates/``: approval gates — the caller's inbox, one gate, claims and decisions.

Who may decide a gate is the engine's rule (:func:`workflows.approvals.decidable_by`,
the filter ``gates_for`` applies), checked again by the services on every claim and
decision. A gate the caller may neither decide nor view (``workflows.view_run``) is a
404 ``gate_not_found``, as one that does not exist: its existence is not leaked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

from django.contrib.auth import get_user_model
from django.db.models import (
    Case,
    CharField as CharOutput,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from workflows import services
from workflows.api import examples
from workflows.api.base import FlowsiteViewSet
from workflows.api.errors import APIError, error_responses
from workflows.api.ids import integer_id
from workflows.api.pagination import LongestWaitingFirst
from workflows.api.permissions import CanViewRuns
from workflows.api.schema import View, documented_action
from workflows.api.serializers_runs import EmptySerializer
from workflows.api.strict import StrictCharField, StrictSerializer
from workflows.approvals import decidable_by
from workflows.definitions import Gate
from workflows.models import Run, Step, Timer
from workflows.permissions import OVERRIDE_GATE_RULE, VIEW_RUN
from workflows.status import (
    RUN_ALIVE,
    Decision,
    DecisionVia,
    StepStatus,
    TimerKind,
    TimerStatus,
)

if TYPE_CHECKING:
    from datetime import datetime

    from django_stubs_ext import WithAnnotations
    from rest_framework.decorators import ViewSetAction

    class _GateAnnotations(TypedDict):
        """What :func:`gates` annotates each gate's step with, so that its queries may
        filter on them."""

        workflow: str
        business_key: str
        claimer: str | None
        decider: str | None
        due_at: datetime | None
        gate_status: str
        waiting_since: datetime


# A gate's status as the API shows it, derived from its step and run (see _gate_status).
GATE_STATUSES = {
    "waiting": "waiting for a decision in a run that is not over",
    "pending": "not reached yet (or reset by a rerun)",
    "timed_out": "its timeout failed it without a decision",
    "decided": "approved or rejected, by a person, its timeout or a skip (see decision.via)",
    "closed": "no longer open and never decided: the run ended, or the step was skipped",
}

# A gate that can be decided right now; the partial index on waiting gates serves it.
# The run's status is an EXISTS on its key, not a condition on the joined run: joined,
# SQLite starts from the many live runs instead of the few waiting steps.
_WAITING = Q(status=StepStatus.WAITING) & Q(
    Exists(Run.objects.filter(pk=OuterRef("run_id"), status__in=sorted(RUN_ALIVE)))
)


def _gate_status() -> Case:
    """The gate's status of :data:`GATE_STATUSES`: the first condition that holds."""
    return Case(
        When(_WAITING, then=Value("waiting")),
        When(status__in=[StepStatus.PENDING, StepStatus.READY], then=Value("pending")),
        When(status=StepStatus.TIMED_OUT, then=Value("timed_out")),
        When(~Q(decision=""), then=Value("decided")),
        default=Value("closed"),
        output_field=CharOutput(),
    )


def gates() -> QuerySet[WithAnnotations[Step, _GateAnnotations]]:
    """Every gate, with what the API shows of its run, claim, decision and due time.

    One SELECT: the run's name and key, the claimer's and decider's usernames are
    joins and the due time a subquery, so neither a page nor a detail loads the run's
    input or snapshot.
    """
    username = get_user_model().USERNAME_FIELD
    due = Timer.objects.filter(
        step_id=OuterRef("pk"), kind=TimerKind.GATE_TIMEOUT, status=TimerStatus.SCHEDULED
    ).order_by("due_at")
    return Step.objects.filter(kind=Gate.kind).annotate(
        workflow=F("run__workflow_name"),
        business_key=F("run__business_key"),
        claimer=F(f"claimed_by__{username}"),
        decider=F(f"decided_by__{username}"),
        due_at=Subquery(due.values("due_at")[:1]),
        gate_status=_gate_status(),
        # Gates never entered have no start; they sort by when their run made them.
        waiting_since=Coalesce("started_at", "created_at"),
    )


# -- responses ---------------------------------------------------------------------------


class OptionSerializer(serializers.Serializer):
    value = serializers.CharField()
    # DRF takes declared fields off the class, so this is no Field.label; the stubs
    # cannot tell.
    label = serializers.CharField()  # type: ignore[assignment]


class ClaimSerializer(serializers.Serializer):
    """Who said they are deciding the gate; ``null`` when nobody has."""

    by = serializers.CharField(source="claimer", help_text="the claimer's username")
    at = serializers.DateTimeField(source="claimed_at")

    def to_representation(self, instance: Step) -> Any:
        return None if instance.claimed_by_id is None else super().to_representation(instance)


class DecisionSerializer(serializers.Serializer):
    """How the gate was decided; ``null`` until it is."""

    value = serializers.ChoiceField(choices=Decision.choices, source="decision")
    via = serializers.ChoiceField(
        choices=DecisionVia.choices,
        source="decided_via",
        help_text="decision, timeout, skip (by someone the gate's rule admits) or override "
        f"(a skip outside its rule, under {OVERRIDE_GATE_RULE})",
    )
    by = serializers.CharField(
        source="decider", allow_null=True, help_text="the decider's username; null: its timeout"
    )
    at = serializers.DateTimeField(source="decided_at", allow_null=True)
    address = serializers.IPAddressField(
        source="decided_from", allow_null=True, help_text="the address the decision came from"
    )
    selections = serializers.ListField(child=serializers.CharField())
    feedback = serializers.CharField()

    def to_representation(self, instance: Step) -> Any:
        return super().to_representation(instance) if instance.decision else None


class GateSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField(help_text="the gate's step name in its workflow")
    run = serializers.UUIDField(source="run_id")
    workflow = serializers.CharField()
    business_key = serializers.CharField()
    prompt = serializers.CharField()
    options = OptionSerializer(many=True)
    min_selections = serializers.IntegerField()
    max_selections = serializers.IntegerField(allow_null=True)
    waiting_since = serializers.DateTimeField(source="started_at", allow_null=True)
    due_at = serializers.DateTimeField(
        allow_null=True, help_text="when its timeout fires; null: it waits for ever"
    )
    claim = ClaimSerializer(source="*", allow_null=True)
    status = serializers.ChoiceField(choices=list(GATE_STATUSES.items()), source="gate_status")
    decision = DecisionSerializer(source="*", allow_null=True)
    version = serializers.IntegerField(
        help_text="changes with every claim and decision; send it back as expected_version"
    )


# -- requests ----------------------------------------------------------------------------


class GateQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=list(GATE_STATUSES.items()),
        default="waiting",
        help_text="waiting (default): the gates you may decide; any other status needs "
        f"the permission {VIEW_RUN} and lists every gate in it",
    )


class VersionedSerializer(StrictSerializer):
    expected_version = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="the version the decision was made on; another one is a 409 stale_version",
    )


class ApproveSerializer(VersionedSerializer):
    selections = serializers.ListField(child=StrictCharField(), default=list)
    feedback = StrictCharField(allow_blank=True, default="")


class RejectSerializer(VersionedSerializer):
    feedback = StrictCharField(allow_blank=True, default="")


_VERB_ERRORS = error_responses(400, 401, 403, 404, 409, 413)


def _gate_verb(
    body_class: type[StrictSerializer], *named_examples: tuple[str, dict[str, Any]]
) -> Callable[[View], ViewSetAction[View]]:
    """The route and schema of a verb on one gate: ``POST /gates/<id>/<verb>/`` with a
    ``body_class`` body (and these examples of it), answered with the gate."""

    schema = {
        "request": body_class,
        "responses": {200: GateSerializer, **_VERB_ERRORS},
        "examples": examples.request_examples(*named_examples),
    }
    return documented_action(schema, detail=True, methods=["post"])


def _address(request: Request) -> str | None:
    """The client's address as the decision records it; servers listening on a Unix
    socket report ``""``, which is no address rather than a bad one."""
    return request.META.get("REMOTE_ADDR") or None


class GateViewSet(FlowsiteViewSet):
    """Approval gates: list, inspect, claim, release, approve, reject.

    Every verb calls its service with the caller and their address; the engine's
    compare-and-set decides races, and the loser gets the 409 it raised.
    """

    serializer_class = GateSerializer
    pagination_class = LongestWaitingFirst
    lookup_value_regex = r"[^/]+"

    @extend_schema(
        parameters=[GateQuerySerializer],
        responses={200: GateSerializer(many=True), **error_responses(400, 401, 403)},
    )
    def list(self, request: Request) -> Response:
        query = GateQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        status = query.validated_data["status"]
        if status == "waiting":
            listed = gates().filter(_WAITING, decidable_by(request.user))
        elif CanViewRuns().has_permission(request, self):
            listed = gates().filter(gate_status=status)
        else:
            raise APIError(
                403,
                "permission_denied",
                f"listing {status} gates needs the permission {CanViewRuns.permission}",
            )
        page = self.paginate_queryset(listed)
        return self.get_paginated_response(GateSerializer(page, many=True).data)

    @extend_schema(responses={200: GateSerializer, **error_responses(401, 404)})
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(GateSerializer(self._gate(pk)).data)

    @_gate_verb(EmptySerializer)
    def claim(self, request: Request, pk: str) -> Response:
        """Say you are deciding this gate: others may not decide it until you release it."""
        return self._apply(pk, EmptySerializer, services.claim_gate)

    @_gate_verb(EmptySerializer)
    def unclaim(self, request: Request, pk: str) -> Response:
        """Release your claim (someone else's needs workflows.override_gate_claim)."""
        return self._apply(pk, EmptySerializer, services.unclaim_gate)

    @_gate_verb(ApproveSerializer, ("approve the demo's dispatch gate", examples.APPROVE))
    def approve(self, request: Request, pk: str) -> Response:
        """Approve the gate with the selected options; the run moves on."""
        return self._apply(pk, ApproveSerializer, services.approve_gate)

    @_gate_verb(RejectSerializer, ("reject a gate", examples.REJECT))
    def reject(self, request: Request, pk: str) -> Response:
        """Reject the gate: its step fails and, by default, the run compensates."""
        return self._apply(pk, RejectSerializer, services.reject_gate)

    def _apply(
        self, pk: str, body_class: type[StrictSerializer], verb: Callable[..., Step]
    ) -> Response:
        """Validate the body, find the gate, and call ``verb`` with it as the caller, from
        their address, with the body's fields (each a keyword of the verb's service);
        answer with the gate as it is then."""
        body = self._body(body_class)
        gate = self._gate(pk)
        verb(gate, user=self.request.user, address=_address(self.request), **body)
        return self._answer(gate)

    def _body(self, serializer_class: type[StrictSerializer]) -> dict[str, Any]:
        body = serializer_class(data=self.request.data)
        body.is_valid(raise_exception=True)
        return body.validated_data

    def _gate(self, pk: str) -> Step:
        """The gate, if the caller may decide it or view runs; else ``gate_not_found``."""
        visible = gates()
        if not CanViewRuns().has_permission(self.request, self):
            visible = visible.filter(decidable_by(self.request.user))
        gate_id = integer_id(pk)
        gate = None if gate_id is None else visible.filter(pk=gate_id).first()
        if gate is None:
            raise APIError(
                404,
                "gate_not_found",
                f"no gate {pk} that you may decide or view",
                {"gate": pk},
            )
        return gate

    def _answer(self, gate: Step) -> Response:
        return Response(GateSerializer(gates().get(pk=gate.pk)).data)
