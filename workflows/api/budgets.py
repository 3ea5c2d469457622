"""``/budgets/``: usage budgets; creating or changing one without a deploy, raising or
resetting one, reporting usage made outside any step.

A budget counter appears once usage was reported against it (or an operator set it).
Reading needs ``workflows.view_run``, every change ``workflows.operate_run``; the verbs
go through :mod:`workflows.services.budgets` with the caller as the actor. Raise and
reset answer the counter after the change with how many held steps and items it
released; create answers the budget, report the counters it counted into.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypedDict, cast

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
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
from workflows.services.budgets import BudgetSet


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
        allow_null=True, help_text="hold or fail; null when the workflow no longer has it"
    )
    origin = serializers.ChoiceField(
        choices=["code", "run time"],
        allow_null=True,
        help_text="declared in Workflow.budgets, or set at run time (it then wins)",
    )
    period_seconds = serializers.FloatField(allow_null=True)
    period_started_at = serializers.DateTimeField(allow_null=True)
    period_ends_at = serializers.DateTimeField(allow_null=True)
    held = serializers.IntegerField(help_text="ready steps and items this budget holds now")
    breaches = serializers.IntegerField(
        help_text="reports that took the usage from below the limit to or past it"
    )
    last_breached_at = serializers.DateTimeField(allow_null=True)
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


# A period of up to a hundred years, in seconds.
LONGEST_PERIOD = 100 * 366 * 24 * 3600


class CreateBudgetSerializer(StrictSerializer):
    workflow = serializers.CharField(max_length=200, help_text="a registered workflow's name")
    dimension = serializers.CharField(
        max_length=60, help_text="what is counted: letters, digits, '_', '.' or '-'"
    )
    limit = LimitField(**_NUMBER, min_value=0, help_text="a number >= 0")
    per = serializers.ChoiceField(
        choices=["workflow", "business_key"],
        default="workflow",
        help_text="count the whole workflow's usage, or each business key's apart",
    )
    period_seconds = serializers.IntegerField(
        min_value=1,
        max_value=LONGEST_PERIOD,
        allow_null=True,
        default=None,
        help_text="start counting from zero every this many seconds; null: never",
    )
    on_exhausted = serializers.ChoiceField(
        choices=["hold", "fail"],
        default="hold",
        help_text="what a used-up budget does to the steps it covers",
    )


class RuntimeBudgetSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    dimension = serializers.CharField()
    per = serializers.ChoiceField(choices=["workflow", "business_key"])
    limit = serializers.DecimalField(**_NUMBER)
    period_seconds = serializers.IntegerField(allow_null=True)
    on_exhausted = serializers.ChoiceField(choices=["hold", "fail"])
    created = serializers.BooleanField(help_text="false: an existing budget was changed")
    version = serializers.IntegerField()
    counters = serializers.IntegerField(help_text="existing counters that took the limit")
    released = serializers.IntegerField(
        help_text="held steps and items released and sent to workers"
    )


class ReportUsageSerializer(StrictSerializer):
    workflow = serializers.CharField(max_length=200, help_text="a registered workflow's name")
    dimension = serializers.CharField(max_length=60, help_text="a dimension it has a budget on")
    amount = LimitField(**_NUMBER, min_value=0, help_text="how much was used, a number >= 0")
    scope_key = serializers.CharField(
        max_length=255,
        allow_blank=True,
        default="",
        help_text="a business key: its budget counts it too (as a run with that key's)",
    )


class ReportedSerializer(serializers.Serializer):
    counters = BudgetSerializer(many=True, help_text="the counters it counted into, after")


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


def _made(made: BudgetSet, workflow: str) -> dict[str, Any]:
    budget = made.budget
    return {
        "workflow": workflow,
        "dimension": budget.dimension,
        "per": budget.per,
        "limit": budget.limit,
        "period_seconds": int(budget.period.total_seconds()) if budget.period else None,
        "on_exhausted": budget.on_exhausted,
        "created": made.created,
        "version": made.version,
        "counters": made.counters,
        "released": made.released,
    }


BUDGET_VERB_ERRORS = error_responses(400, 401, 403, 404, 409, 413)
CHANGES = ("create", "report", "raise_limit", "reset")


class BudgetViewSet(FlowsiteViewSet):
    """Usage budgets: list, one, create or change, report usage, raise, reset."""

    permission_classes = [CanViewRuns]
    serializer_class = BudgetSerializer
    pagination_class = InSequence
    filter_backends = [DjangoFilterBackend]
    filterset_class = BudgetFilter
    lookup_value_regex = r"[^/]+"

    def get_queryset(self) -> QuerySet[BudgetCounter]:
        return budget_services.budget_counters()

    def get_permissions(self) -> Sequence[Any]:
        """Every change needs ``workflows.operate_run``, as the services ask."""
        return [CanOperateRuns()] if self.action in CHANGES else super().get_permissions()

    @extend_schema(
        request=CreateBudgetSerializer,
        responses={
            201: RuntimeBudgetSerializer,
            200: RuntimeBudgetSerializer,
            **error_responses(400, 401, 403, 409, 413),
        },
        examples=examples.request_examples(
            ("a daily budget per customer", examples.CREATE_BUDGET),
            ("a hard cap on the workflow", examples.CREATE_BUDGET_FAIL),
        ),
    )
    def create(self, request: Request) -> Response:
        """Create or change a budget without a deploy (201 created, 200 changed). It wins
        over one the workflow declares on the same dimension and ``per``; existing
        counters take its limit, and the work it held is released to be decided again."""
        body = validated(request.data, CreateBudgetSerializer)
        seconds = body["period_seconds"]
        made = budget_services.create_budget(
            body["workflow"],
            body["dimension"],
            limit=body["limit"],
            per=body["per"],
            period=timedelta(seconds=seconds) if seconds is not None else None,
            on_exhausted=body["on_exhausted"],
            user=request.user,
        )
        return Response(
            RuntimeBudgetSerializer(_made(made, body["workflow"])).data,
            status=status.HTTP_201_CREATED if made.created else status.HTTP_200_OK,
        )

    @extend_schema(
        request=ReportUsageSerializer,
        responses={200: ReportedSerializer, **error_responses(400, 401, 403, 409, 413)},
        examples=examples.request_examples(("usage paid outside a step", examples.REPORT_USAGE)),
    )
    @action(detail=False, methods=["post"])
    def report(self, request: Request) -> Response:
        """Record usage made outside any step, counted as a step's ``ctx.report_usage``
        is (the workflow's budget, and the business key's with ``scope_key``), and kept
        in the usage history with the caller as who reported it."""
        body = validated(request.data, ReportUsageSerializer)
        views = budget_services.report_usage(
            body["workflow"],
            body["dimension"],
            body["amount"],
            scope_key=body["scope_key"],
            user=request.user,
        )
        return Response(ReportedSerializer({"counters": [v.as_dict() for v in views]}).data)

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
    @action(detail=True, methods=["post"], url_path="raise")
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
    @action(detail=True, methods=["post"])
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
