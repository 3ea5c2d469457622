"""``POST /bulk/units/{verb}/``: the bulk recovery of stuck units
(:mod:`workflows.services.bulk_units`), as ``POST /runs/bulk/{verb}/`` is the bulk over runs.

The body names the units by a filter (``units``: ``kind``, ``status``, ``workflow``,
``queue``, ``held_on``, ``older_than``); ``dry_run`` (the default) only says what the
verb would do to each. Needs ``workflows.operate_run``, as the single verbs do. A bad
filter is a 400 naming the field; a verb that does not apply to the kind of unit is a
400 ``invalid_input`` naming the rule; nothing is read or written then.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.base import FlowsiteAPIView
from workflows.api.errors import error_responses
from workflows.api.permissions import CanOperateRuns
from workflows.api.serializers_runs import MAX_AGE, Flag
from workflows.api.strict import StrictCharField, StrictSerializer
from workflows.services.bulk import bulk
from workflows.services.bulk_units import HELD_ON, UNIT_KIND_CHOICES, UNIT_KINDS, UNIT_VERBS
from workflows.status import CompensationStatus, StepStatus
from workflows.validation import max_length

# Every status some kind of unit has; which kind has which is the service's to say.
_STATUSES = sorted(set(StepStatus.values) | set(CompensationStatus.values))


class UnitFilterSerializer(StrictSerializer):
    """Which units a bulk acts on: all criteria given must hold."""

    kind = serializers.ChoiceField(choices=UNIT_KIND_CHOICES, help_text="the kind of unit")
    status = serializers.ListField(
        child=serializers.ChoiceField(choices=_STATUSES),
        required=False,
        allow_empty=False,
        help_text="in any of these statuses (a compensation is never waiting, for one)",
    )
    workflow = StrictCharField(required=False, max_length=200, help_text="of runs of it")
    queue = StrictCharField(
        required=False,
        max_length=max_length(UNIT_KINDS["step"].model, "queue"),
        help_text="routed to this queue",
    )
    held_on = serializers.ChoiceField(
        choices=list(HELD_ON), required=False, help_text="held as explain says"
    )
    older_than = serializers.DurationField(
        required=False,
        min_value=timedelta(0),
        max_value=MAX_AGE,
        help_text="unchanged for this long (a heartbeat is a change): ISO 8601 or seconds",
    )


class BulkUnitsSerializer(StrictSerializer):
    units = UnitFilterSerializer()
    dry_run = Flag(required=False, default=True, help_text="say what would happen; change nothing")
    reason = StrictCharField(required=False, allow_blank=True, help_text="revoke, fail_step: why")


class UnitItemSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=UNIT_KIND_CHOICES)
    unit = serializers.IntegerField(help_text="the step's, item's or compensation's id")
    run = serializers.CharField()
    step = serializers.CharField()
    item = serializers.CharField(help_text="the item's key; empty for a step")
    status = serializers.CharField(help_text="as read, or the new status once done")
    attempt = serializers.IntegerField(help_text="the attempt read, the one the verb is pinned to")
    outcome = serializers.ChoiceField(choices=["eligible", "skipped", "done", "failed"])
    reason = serializers.CharField(help_text="why skipped, or the error of a failed unit")
    code = serializers.CharField(help_text="the error's code, for a failed unit")


class BulkUnitsResultSerializer(serializers.Serializer):
    """The shape ``workflows_bulk --units KIND --json`` prints."""

    verb = serializers.CharField()
    dry_run = serializers.BooleanField()
    kind = serializers.CharField()
    totals = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="matched, and eligible/skipped (dry run) or done/skipped/failed",
    )
    units = UnitItemSerializer(many=True)


class BulkUnitsView(FlowsiteAPIView):
    """Apply a unit verb to the units a filter selects."""

    permission_classes = [CanOperateRuns]

    @extend_schema(
        operation_id="bulk_units",
        parameters=[
            OpenApiParameter(
                "verb",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                enum=list(UNIT_VERBS),
                description="the unit verb; another is a 400",
            )
        ],
        request=BulkUnitsSerializer,
        responses={200: BulkUnitsResultSerializer, **error_responses(400, 401, 403)},
    )
    def post(self, request: Request, verb: str) -> Response:
        """Revoke, fail or retry each selected step, item or compensation, each in its
        own transaction, pinned to what was read of it; by default a dry run that only
        says what the verb would do to each."""
        serializer = BulkUnitsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        order: dict[str, Any] = dict(serializer.validated_data)
        selection = dict(order["units"])
        selection["statuses"] = selection.pop("status", ())
        options = {"reason": order["reason"]} if order.get("reason") else {}
        result = bulk(verb, units=selection, dry_run=order["dry_run"], user=request.user, **options)
        body = {
            "verb": result.verb,
            "dry_run": result.dry_run,
            "kind": result.units,
            "totals": result.totals(),
            "units": [item._asdict() for item in result.items],
        }
        return Response(BulkUnitsResultSerializer(body).data)
