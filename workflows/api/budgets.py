"""``/budgets/``: usage budgets, and raising or resetting one.

A budget counter appears once usage was reported against it (or an operator set it).
Reading needs ``workflows.view_run``, changing ``workflows.operate_run``; both verbs go
through :mod:`workflows.services.budgets` with the caller as the actor, and answer the
counter after the change with how many held steps and items it released.
"""

from __future__ import annotations

from typing import TypedDict, cast

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api import examples
from workflows.api.base import FlowsiteViewSet
from workflows.api.errors import APIError, error_responses
from workflows.api.ids import integer_id
from workflows.api.pagination import InSequence
from workflows.api.permissions import CanOperateRuns, CanViewRuns
from workflows.api.runs import validated
from workflows.api.serializers_runs import EmptySerializer
from workflows.api.strict import StrictSerializer
from workflows.engine.limits.budgets import BudgetChange
from workflows.models import BudgetCounter
from workflows.services import budgets as budget_services


class _Digits(TypedDict):
    """A decimal's size as ``DecimalField``'s keywords, typed so each is checked as one."""

    max_digits: int
    decimal_places: int


_NUMBER: _Digits = {"max_digits": 24, "decimal_places": 6}


class BudgetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    workflow = serializers.CharField()
    dimension = serializers.CharField()
    per = serializers.ChoiceField(choices=["workflow", "business_key"])
    scope_key = serializers.CharField(help_text="the business key; empty for per='workflow'")
    used = serializers.DecimalField(**_NUMBER, help_text="in the current period")
    limit = serializers.DecimalField(**_NUMBER)
    remaining = serializers.DecimalField(**_NUMBER)
    exhausted = serializers.BooleanField()
    on_exhausted = serializers.CharField(
        allow_null=True, help_text="hold or fail; null when no registered workflow declares it"
    )
    period_seconds = serializers.FloatField(allow_null=True)
    period_started_at = serializers.DateTimeField(allow_null=True)
    period_ends_at = serializers.DateTimeField(allow_null=True)
    held = serializers.IntegerField(help_text="ready steps and items this budget holds now")
    version = serializers.IntegerField()
    updated_at = serializers.DateTimeField()


class BudgetChangeSerializer(serializers.Serializer):
    budget = BudgetSerializer()
    released = serializers.IntegerField(
        help_text="held steps and items released and sent to workers"
    )
    limit_before = serializers.DecimalField(**_NUMBER)
    used_before = serializers.DecimalField(**_NUMBER)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "number", "minimum": 0},
            {"type": "string", "pattern": r"^\d{1,18}(\.\d{1,6})?$"},
        ]
    }
)
class LimitField(serializers.DecimalField):
    """A limit >= 0 with at most 18 digits before the point and 6 after, given as a JSON
    number or a decimal string: both are taken, and the schema says so."""


class RaiseBudgetSerializer(StrictSerializer):
    limit = LimitField(
        **_NUMBER,
        min_value=0,
        help_text="the new limit: a number >= 0 (a JSON number or a decimal string)",
    )


class BudgetFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow_name", help_text="the workflow's name")
    dimension = filters.CharFilter()
    scope_key = filters.CharFilter(help_text="a business key; empty for per-workflow budgets")

    class Meta:
        model = BudgetCounter
        fields = ["workflow", "dimension", "scope_key"]


def _budget(pk: str) -> BudgetCounter:
    counter_id = integer_id(pk)
    try:
        found = None if counter_id is None else budget_services.get_budget(counter_id)
    except BudgetCounter.DoesNotExist:
        found = None
    if found is None:
        raise APIError(404, "budget_not_found", f"no budget counter has id {pk!r}")
    return found


def _changed(change: BudgetChange) -> Response:
    counter = budget_services.get_budget(change.counter_id)
    body = {
        "budget": budget_services.budget_view(counter).as_dict(),
        "released": change.released,
        "limit_before": change.limit_before,
        "used_before": change.used_before,
    }
    return Response(BudgetChangeSerializer(body).data)


BUDGET_VERB_ERRORS = error_responses(400, 401, 403, 404, 409, 413)


class BudgetViewSet(FlowsiteViewSet):
    """Usage budgets: list, one, raise, reset."""

    permission_classes = [CanViewRuns]
    serializer_class = BudgetSerializer
    pagination_class = InSequence
    filter_backends = [DjangoFilterBackend]
    filterset_class = BudgetFilter
    lookup_value_regex = r"[^/]+"

    def get_queryset(self) -> QuerySet[BudgetCounter]:
        return budget_services.budget_counters()

    @extend_schema(responses={200: BudgetSerializer(many=True), **error_responses(400, 401, 403)})
    def list(self, request: Request) -> Response:
        """Budget counters in id order, with their usage now and the work they hold."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        # Never None: pagination_class is set.
        counters = cast(list[BudgetCounter], page)
        views = [budget_services.budget_view(counter).as_dict() for counter in counters]
        return self.get_paginated_response(BudgetSerializer(views, many=True).data)

    @extend_schema(responses={200: BudgetSerializer, **error_responses(401, 403, 404)})
    def retrieve(self, request: Request, pk: str) -> Response:
        """One budget counter."""
        return Response(BudgetSerializer(budget_services.budget_view(_budget(pk)).as_dict()).data)

    @extend_schema(
        request=RaiseBudgetSerializer,
        responses={200: BudgetChangeSerializer, **BUDGET_VERB_ERRORS},
        examples=examples.request_examples(("raise the limit", examples.RAISE_BUDGET)),
    )
    @action(detail=True, methods=["post"], url_path="raise", permission_classes=[CanOperateRuns])
    def raise_limit(self, request: Request, pk: str) -> Response:
        """Set the budget's limit; the steps and items it held start again."""
        counter = _budget(pk)
        body = validated(request.data, RaiseBudgetSerializer)
        return _changed(
            budget_services.raise_budget(
                counter.workflow_name,
                counter.dimension,
                limit=body["limit"],
                scope_key=counter.scope_key,
                user=request.user,
            )
        )

    @extend_schema(
        request=EmptySerializer, responses={200: BudgetChangeSerializer, **BUDGET_VERB_ERRORS}
    )
    @action(detail=True, methods=["post"], permission_classes=[CanOperateRuns])
    def reset(self, request: Request, pk: str) -> Response:
        """Set the budget's usage back to 0; the steps and items it held start again."""
        counter = _budget(pk)
        validated(request.data, EmptySerializer)
        return _changed(
            budget_services.reset_budget(
                counter.workflow_name,
                counter.dimension,
                scope_key=counter.scope_key,
                user=request.user,
            )
        )
