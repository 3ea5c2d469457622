"""Bodies of the flow endpoints, in and out.

Requests are strict as the run endpoints' are (:mod:`workflows.api.serializers_runs`):
unknown fields, strings that are not JSON strings, numbers that are not JSON integers
and NUL characters are 400s naming the field, before the engine is asked. The engine
checks again what only it can (a member's name left blank by whitespace, an input its
workflow refuses). Responses shape :meth:`workflows.queries.flows.FlowGraph.as_dict` and
the list's rows; every field is typed so that the OpenAPI schema describes them.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from workflows.api.serializers_runs import JSONObjectField, StrictInteger, TagsObjectField
from workflows.api.strict import StrictCharField, StrictSerializer
from workflows.engine.flows.close import CancelPolicy
from workflows.engine.flows.joins import JoinSpec
from workflows.models import Flow, FlowMember
from workflows.status import FlowStatus, JoinKind, RunStatus
from workflows.validation import max_length

# The largest number a ``PositiveIntegerField`` holds on every supported database: a
# join's k and a revision are stored in one, so a larger number names nothing.
MAX_STORED_INT = 2**31 - 1
NAMED_JOINS = (JoinKind.ALL.value, JoinKind.ANY.value)
MEMBER_NAME = max_length(FlowMember, "name")


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": list(NAMED_JOINS)},
            {"type": "integer", "minimum": 1, "maximum": MAX_STORED_INT},
        ],
        "description": '"all" upstream members completed, "any" one, or an integer k: at least k',
    }
)
class JoinField(serializers.Field):
    """A member's join as a caller names it: ``"all"``, ``"any"`` or an integer k ≥ 1."""

    default_error_messages = {
        "invalid": f'a join is "all", "any" or an integer from 1 to {MAX_STORED_INT}',
    }

    def to_internal_value(self, data: Any) -> JoinSpec:
        if isinstance(data, str) and data in NAMED_JOINS:
            return data
        if isinstance(data, int) and not isinstance(data, bool) and 1 <= data <= MAX_STORED_INT:
            return data
        self.fail("invalid")

    def to_representation(self, value: JoinSpec) -> JoinSpec:
        return value


def member_name(**kwargs: Any) -> StrictCharField:
    return StrictCharField(max_length=MEMBER_NAME, **kwargs)


# Requests.


class CreateFlowSerializer(StrictSerializer):
    name = StrictCharField(max_length=max_length(Flow, "name"), help_text="what the flow is for")
    key = StrictCharField(
        required=False,
        max_length=max_length(Flow, "key"),
        help_text="your own unique key: creating a flow with a key seen before returns that "
        "flow (200) when the name is the same, else 409 idempotency_conflict",
    )
    tags = TagsObjectField(
        required=False,
        help_text="the tags its members start with unless given their own: keys "
        "`^[a-z][a-z0-9_.-]{0,63}$`, values strings of at most 255 characters, at most 32",
    )


class AddMemberSerializer(StrictSerializer):
    workflow = StrictCharField(
        max_length=200, help_text="a registered workflow name (latest version)"
    )
    input = JSONObjectField(
        required=False, default=dict, help_text="the run's input, checked by clean_input"
    )
    member = member_name(help_text="the member's name, unique in the flow")
    after = serializers.ListField(
        child=member_name(),
        required=False,
        default=list,
        help_text="members this one waits for (edges staged with it)",
    )
    join = JoinField(required=False, default=JoinKind.ALL.value)
    tags = TagsObjectField(
        required=False,
        help_text="the member's own tags, replacing the flow's whole (default: the flow's)",
    )


class AddEdgeSerializer(StrictSerializer):
    upstream = member_name(help_text="the member waited for")
    downstream = member_name(help_text="the member that waits; it must not have started")
    expected_revision = StrictInteger(
        required=False,
        min_value=0,
        max_value=MAX_STORED_INT,
        help_text="the revision the graph was read at: refused with 409 stale_revision "
        "(details.revision: the current one) when the graph has moved since",
    )


class SetJoinSerializer(StrictSerializer):
    member = member_name(help_text="a member still blocked")
    join = JoinField()


class CancelFlowSerializer(StrictSerializer):
    policy = serializers.ChoiceField(
        choices=[policy.value for policy in CancelPolicy],
        required=False,
        default=CancelPolicy.CANCEL_ALL.value,
        help_text="cancel_all: every member not ended (compensated as a run cancel is); "
        "cancel_pending: only the blocked ones; flow_only: close the flow, leave members",
    )
    reason = StrictCharField(required=False, default="", allow_blank=True)


# Responses.


class FlowSerializer(serializers.ModelSerializer):
    """A flow as the list shows it: where it stands, and how many members it has."""

    status = serializers.ChoiceField(choices=FlowStatus.choices)
    members = serializers.IntegerField(source="member_count", help_text="its member runs")
    unfinished = serializers.IntegerField(help_text="members whose run has not ended")
    summary = serializers.DictField(
        help_text="once ended: the members that did not complete, by status"
    )
    tags = TagsObjectField(help_text="the tags its members start with unless given their own")

    class Meta:
        model = Flow
        fields = [
            "id",
            "name",
            "key",
            "status",
            "revision",
            "members",
            "unfinished",
            "summary",
            "tags",
            "created_at",
            "updated_at",
            "finished_at",
        ]
        read_only_fields = fields


class FlowMemberSerializer(serializers.Serializer):
    name = serializers.CharField()
    run_id = serializers.UUIDField(help_text="the member's run (GET /api/runs/{id}/)")
    workflow = serializers.CharField()
    status = serializers.ChoiceField(choices=RunStatus.choices, help_text="its run's status")
    join = JoinField()
    upstream = serializers.ListField(
        child=serializers.CharField(), help_text="the members it waits for"
    )
    error = serializers.JSONField(allow_null=True, help_text="its run's error, unless completed")


class FlowEdgeSerializer(serializers.Serializer):
    upstream = serializers.CharField()
    downstream = serializers.CharField()


class FlowDetailSerializer(serializers.Serializer):
    """A flow's graph, as :meth:`~workflows.queries.flows.FlowGraph.as_dict` gives it."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    key = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=FlowStatus.choices)
    revision = serializers.IntegerField(
        help_text="counts the changes to the graph; send it as an edge's expected_revision"
    )
    summary = serializers.DictField(
        help_text="once ended: the members that did not complete, by status"
    )
    tags = TagsObjectField(help_text="the tags its members start with unless given their own")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="how many members' runs are in each status"
    )
    members = FlowMemberSerializer(many=True, help_text="in the order they were added")
    edges = FlowEdgeSerializer(many=True, help_text="in the order they were staged")


class RevisionSerializer(serializers.Serializer):
    """What a change to the graph answers: the flow's revision after it."""

    flow = serializers.UUIDField()
    revision = serializers.IntegerField()


class FlowCancelledSerializer(serializers.Serializer):
    cancelled = serializers.IntegerField(
        help_text="members the flow's cancellation cancelled (the same on a repeated request)"
    )
    policy = serializers.CharField(help_text="the policy stored when the flow was cancelled")
    reason = serializers.CharField(help_text="the reason stored when the flow was cancelled")
    by = serializers.CharField(
        allow_null=True, help_text="who cancelled the flow (null: code, or a deleted user)"
    )
    members = serializers.ListField(
        child=serializers.CharField(), help_text="the names of the members it cancelled"
    )
    complete = serializers.BooleanField(
        help_text="every member the policy covers is dealt with (else the sweeper finishes)"
    )
    flow = FlowDetailSerializer()
