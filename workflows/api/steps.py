"""``/steps/``: one step of a run, its fan-out items, and the operator verbs on a step
(retry, skip, and revoke: of the step's running attempt, an item's or a compensation's).

A step is reached by the id a run's detail lists; the verbs go through
:mod:`workflows.services` with the caller as the actor, and a refusal is a 409
``invalid_state`` with what the step's run allows now, as for the run verbs.
"""

from __future__ import annotations

from typing import Any, cast

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from workflows import services
from workflows.api import examples
from workflows.api.base import FlowsiteViewSet
from workflows.api.errors import error_responses
from workflows.api.filters import ItemFilter
from workflows.api.ids import step_pk
from workflows.api.pagination import InSequence
from workflows.api.permissions import CanOperateRuns, CanViewRuns
from workflows.api.runs import refused_as_invalid_state, validated
from workflows.api.serializers_runs import (
    EmptySerializer,
    ItemSerializer,
    RevokedSerializer,
    RevokeSerializer,
    SkipStepSerializer,
    StepSerializer,
)
from workflows.models import FanOutItem, Step
from workflows.queries import get_step
from workflows.services.leases import LeasedUnit, RevokedLease, shown_attempts

STEP_VERB_ERRORS = error_responses(400, 401, 403, 404, 409, 413)


class StepViewSet(FlowsiteViewSet):
    """Steps: one step, its fan-out items, retry, skip and revoke."""

    permission_classes = [CanViewRuns]
    serializer_class = StepSerializer
    queryset = Step.objects.all()
    filter_backends = [DjangoFilterBackend]
    filterset_class = None  # set by the list actions
    # Anything up to the next slash, so that a malformed id is a 404 step_not_found.
    lookup_value_regex = r"[^/]+"

    @extend_schema(responses={200: StepSerializer, **error_responses(401, 403, 404)})
    def retrieve(self, request: Request, pk: str) -> Response:
        """A step: attempts, outcome, its gate's fields, its fan-out's counters."""
        return Response(StepSerializer(get_step(step_pk(pk))).data)

    @extend_schema(
        responses={200: ItemSerializer(many=True), **error_responses(400, 401, 403, 404)}
    )
    @action(
        detail=True,
        methods=["get"],
        serializer_class=ItemSerializer,
        queryset=FanOutItem.objects.all(),
        pagination_class=InSequence,
        filterset_class=ItemFilter,
    )
    def items(self, request: Request, pk: str) -> Response:
        """The items of a fan-out step in their order, optionally of some statuses."""
        step = get_step(step_pk(pk))
        items = self.filter_queryset(self.get_queryset().filter(step_id=step.pk))
        page = self.paginate_queryset(items)
        return self.get_paginated_response(ItemSerializer(page, many=True).data)

    @extend_schema(request=EmptySerializer, responses={200: StepSerializer, **STEP_VERB_ERRORS})
    @action(detail=True, methods=["post"], permission_classes=[CanOperateRuns])
    def retry(self, request: Request, pk: str) -> Response:
        """Run a failed step again with fresh attempts; its failed run resumes."""
        step = get_step(step_pk(pk))
        validated(request.data, EmptySerializer)
        retried = refused_as_invalid_state(
            step.run_id, lambda: services.retry_step(step, user=request.user)
        )
        return Response(StepSerializer(retried).data)

    @extend_schema(
        request=SkipStepSerializer,
        responses={200: StepSerializer, **STEP_VERB_ERRORS},
        examples=examples.request_examples(("skip a task step", examples.SKIP)),
    )
    @action(detail=True, methods=["post"], permission_classes=[CanOperateRuns])
    def skip(self, request: Request, pk: str) -> Response:
        """Record the step as done with ``output``, without running it; the run moves on."""
        step = get_step(step_pk(pk))
        output = validated(request.data, SkipStepSerializer)["output"]
        skipped = refused_as_invalid_state(
            step.run_id, lambda: services.skip_step(step, user=request.user, output=output)
        )
        return Response(StepSerializer(skipped).data)

    @extend_schema(
        request=RevokeSerializer,
        responses={200: RevokedSerializer, **STEP_VERB_ERRORS},
        examples=examples.request_examples(
            ("revoke a task step's running attempt", examples.REVOKE),
            ("revoke a fan-out item's running attempt", examples.REVOKE_ITEM),
        ),
    )
    @action(detail=True, methods=["post"], permission_classes=[CanOperateRuns])
    def revoke(self, request: Request, pk: str) -> Response:
        """Take the lease of running attempt ``attempt`` now: of the step (a task), of its
        item ``item``, or of its compensation; the work runs again, without using up an
        attempt.

        Pinned: ``attempt`` (required) is the attempt the client saw. When the unit is no
        longer in it, or it is not running, nothing changes and the answer is a 200 with
        ``revoked: false`` and the ``reason`` (a repeated request is ``already_revoked``,
        never a second revocation). The worker that held it sees ``LeaseLost`` at its
        next heartbeat and its result is refused. A fan-out step itself is a 409
        ``invalid_state``; an unknown step, item or compensation a 404
        ``step_not_found``.
        """
        step = get_step(step_pk(pk))
        body = validated(request.data, RevokeSerializer)
        result = refused_as_invalid_state(
            step.run_id,
            lambda: services.revoke_lease(
                step,
                expected_attempt=body["attempt"],
                expected_round=body.get("round"),
                item=body.get("item"),
                compensation=body["compensation"],
                reason=body["reason"],
                user=request.user,
            ),
        )
        return Response(RevokedSerializer(revoked(result, get_step(step.pk))).data)


def revoked(result: RevokedLease, step: Step) -> dict[str, Any]:
    """What :class:`RevokedSerializer` shows of a revoke and the unit it named."""
    unit = cast("LeasedUnit", result.unit)  # filled by services.revoke_lease
    attempt, max_attempts = shown_attempts(unit)
    if isinstance(unit, Step):
        kind, item = "step", None
    elif isinstance(unit, FanOutItem):
        kind, item = "item", unit.key
    else:
        kind, item = "compensation", unit.item.key if unit.item is not None else None
    return {
        "revoked": result.revoked,
        "reason": result.reason,
        "revoked_attempt": result.attempt,
        "kind": kind,
        "id": unit.pk,
        "item": item,
        "status": unit.status,
        "attempt": attempt,
        "max_attempts": max_attempts,
        "failure_class": unit.failure_class,
        "error": unit.error,
        "step": step,
    }
