"""Bodies of the run, step, event, signal and bulk endpoints, in and out.

Request serializers are strict, because a typo in a field name that is silently
ignored (``compensat: false``) does what the caller did not ask for: unknown fields
are refused (:mod:`workflows.api.strict`), and strings and booleans must be JSON
strings and booleans, not values DRF would coerce (``1`` as a workflow name, ``"no"``
as ``false``). Response serializers only shape rows for output; every field is typed
so that the OpenAPI schema describes the bodies.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib.contenttypes.models import ContentType
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from workflows.api.long_poll import timed_out_field
from workflows.api.strict import StrictCharField, StrictSerializer, StrictUUIDField
from workflows.definitions.deadline import deadline_problems, parse_deadline
from workflows.holds import HoldKind
from workflows.models import Event, FanOutItem, Run, Step
from workflows.queries import Attention
from workflows.queries.frames import STEP_TELEMETRY_FIELDS, UNIT_TELEMETRY_FIELDS
from workflows.services.bulk import MAX_IDS
from workflows.status import Decision, DecisionVia, FailureClass, RunStatus, RunTrigger
from workflows.tracing import trace_id_of
from workflows.validation import max_length

# The longest ``older_than`` a bulk filter takes: beyond it ``now - older_than`` would
# leave the calendar, and no run is that old anyway.
MAX_AGE = timedelta(days=100 * 365)


class Flag(serializers.BooleanField):
    """A JSON boolean; ``"yes"``, ``1`` and the like are refused."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictInteger(serializers.IntegerField):
    """A JSON integer; ``"5"``, ``5.0`` and ``true`` are refused rather than coerced."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


def priority_field(**kwargs: Any) -> StrictInteger:
    return StrictInteger(
        min_value=-1000,
        max_value=1000,
        help_text="-1000 to 1000: a run's ready work is claimed before that of runs with "
        "a lower priority, and a queued run starts before them",
        **kwargs,
    )


@extend_schema_field(
    {
        "description": "when the run must have ended, or it fails with deadline_exceeded "
        "and compensates",
        "oneOf": [
            {"type": "number", "description": "seconds from now, more than 0"},
            {
                "type": "string",
                "description": "an ISO 8601 date and time with its offset "
                "(2026-12-24T18:00:00+01:00), or an ISO 8601 duration from now (PT30M)",
            },
        ],
    }
)
class DeadlineField(serializers.Field):
    """When the run must have ended: seconds from now (a JSON number), an ISO 8601
    duration, or an ISO 8601 moment with its offset. A value that is none of these, not
    positive, without a timezone or too far is a 400 naming the field; a moment already
    past is refused by the engine (400 ``invalid_input``), on the database clock."""

    default_error_messages = {"invalid": "{problem}"}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "when the run must have ended, or it fails with deadline_exceeded and "
            "compensates: seconds from now, an ISO 8601 duration (PT30M) or an ISO 8601 "
            "date and time with its offset; default the workflow's deadline",
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> timedelta | datetime:
        try:
            deadline = parse_deadline(data)
        except ValueError as exc:
            self.fail("invalid", problem=str(exc))
        problems = deadline_problems(deadline)
        if problems:
            self.fail("invalid", problem=problems[0])
        return deadline

    def to_representation(self, value: Any) -> Any:
        return value.isoformat() if isinstance(value, datetime) else value.total_seconds()


# Requests.


@extend_schema_field({"type": "object", "additionalProperties": True})
class JSONObjectField(serializers.JSONField):
    """A JSON object, as the schema says; any other value is refused by the engine
    (400 ``invalid_input``), which checks it wherever a run is started from."""


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {"type": "string", "maxLength": 255},
        "maxProperties": 32,
        "example": {"customer": "acme", "region": "eu"},
    }
)
class TagsObjectField(serializers.JSONField):
    """A run's tags: keys matching ``^[a-z][a-z0-9_.-]{0,63}$``, string values of at most
    255 characters, at most 32; anything else is refused by the engine (400
    ``invalid_input`` naming the tag)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "the run's tags, to find it by (?tag=key:value): keys `^[a-z][a-z0-9_.-]{0,63}$`, "
            "values strings of at most 255 characters, at most 32 tags",
        )
        super().__init__(**kwargs)


class StartRunSerializer(StrictSerializer):
    workflow = StrictCharField(
        max_length=200, help_text="a registered workflow name (latest version)"
    )
    input = JSONObjectField(
        required=False,
        default=dict,
        help_text="the run's input, checked by the workflow's clean_input (the demo's "
        "order_fulfilment needs order_id and lines of sku, quantity and price)",
    )
    business_key = StrictCharField(
        required=False, max_length=255, help_text="your own key for the run"
    )
    idempotency_key = StrictCharField(
        required=False,
        max_length=255,
        help_text="instead of the Idempotency-Key header (both given must be equal)",
    )
    priority = priority_field(required=False)
    deadline = DeadlineField(required=False)
    variables = JSONObjectField(
        required=False,
        help_text="the run's first variables, which its steps read (ctx.variables) and "
        "change (ctx.set_variables); a JSON object of at most MAX_VARIABLES_BYTES bytes",
    )
    title = StrictCharField(
        required=False,
        max_length=200,
        allow_blank=True,
        help_text="what the lists show of the run (default: its workflow)",
    )
    tags = TagsObjectField(required=False)


class ReasonSerializer(StrictSerializer):
    """Terminate and pause: why, kept in the run's history."""

    reason = StrictCharField(required=False, default="", allow_blank=True)


class CancelSerializer(ReasonSerializer):
    compensate = Flag(
        required=False, default=True, help_text="run the compensations of completed steps"
    )


class RerunSerializer(ReasonSerializer):
    from_step = StrictCharField(
        max_length=200, help_text="the name of the step to run again, with all after it"
    )
    deadline = DeadlineField(
        required=False,
        help_text="a new deadline for the rerun run (its old one is cleared): seconds from "
        "now, an ISO 8601 duration or an ISO 8601 date and time with its offset",
    )


class RetrySerializer(StrictSerializer):
    """Replay an ended run; its old deadline is cleared unless a new one is given."""

    deadline = DeadlineField(
        required=False,
        help_text="a new deadline for the retried run (its old one is cleared): seconds "
        "from now, an ISO 8601 duration or an ISO 8601 date and time with its offset",
    )


class PrioritySerializer(StrictSerializer):
    """Change a run's priority (and that of its unstarted work and live children)."""

    priority = priority_field()


class BusinessKeySerializer(StrictSerializer):
    """Give a run not ended a business key (the key it holds already: nothing changes)."""

    business_key = StrictCharField(
        max_length=255,
        help_text="refused (409 business_key_in_use) when another live run of a workflow "
        "with unique_business_key holds it",
    )


class EmptySerializer(StrictSerializer):
    """A verb that takes no options: the body is empty or ``{}``."""


class SkipStepSerializer(StrictSerializer):
    output = serializers.JSONField(
        required=False, default=None, allow_null=True, help_text="recorded as the step's output"
    )


class RevokeSerializer(ReasonSerializer):
    """Revoke the lease of a running attempt: the step's own (a task), one of its fan-out
    items' (``item``), or its compensation's (``compensation``), pinned to the attempt the
    client saw (``attempt``)."""

    attempt = serializers.IntegerField(
        min_value=1,
        max_value=2**31 - 1,
        help_text=(
            "the attempt to revoke, as the client saw it: a step's attempt is numbered "
            "within its round (the step's attempt), an item's or a compensation's as "
            "it is; if the unit is no longer in it, nothing changes and the answer says why"
        ),
    )
    round = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=2**31 - 1,
        help_text=(
            "the step's round the attempt belongs to, as the client saw it (the step's "
            "round); left out: the step's current round. Items and compensations have "
            "no rounds"
        ),
    )

    item = StrictCharField(
        required=False,
        max_length=max_length(FanOutItem, "key"),
        help_text="the key of the fan-out item whose running attempt to revoke",
    )
    compensation = Flag(
        required=False,
        default=False,
        help_text="revoke the step's running compensation (that of item, if given)",
    )


class SendSignalSerializer(StrictSerializer):
    name = StrictCharField(
        max_length=200, help_text="a signal a WaitForSignal step of the run waits for"
    )
    payload = serializers.JSONField(required=False, default=None, allow_null=True)
    idempotency_key = StrictCharField(
        required=False,
        max_length=255,
        help_text="instead of the Idempotency-Key header (both given must be equal)",
    )


class BulkFilterSerializer(StrictSerializer):
    """Which runs a bulk acts on: all criteria given must hold, and one at least is given."""

    status = serializers.ListField(
        child=serializers.ChoiceField(choices=RunStatus.choices), required=False, allow_empty=False
    )
    workflow = StrictCharField(required=False, max_length=200)
    business_key = StrictCharField(required=False, max_length=255)
    older_than = serializers.DurationField(
        required=False,
        min_value=timedelta(0),
        max_value=MAX_AGE,
        help_text="created more than this long ago: ISO 8601 (P2D, PT30M) or seconds",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError(
                "a filter needs at least one of: "
                + ", ".join(self.fields)
                + " (it would select every run)"
            )
        return attrs


class BulkSerializer(StrictSerializer):
    ids = serializers.ListField(
        child=StrictUUIDField(), required=False, allow_empty=False, max_length=MAX_IDS
    )
    filter = BulkFilterSerializer(required=False)
    dry_run = Flag(required=False, default=True, help_text="say what would happen; change nothing")
    reason = StrictCharField(required=False, allow_blank=True)
    compensate = Flag(required=False)
    from_step = StrictCharField(required=False, max_length=200, help_text="rerun: the step's name")
    priority = priority_field(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("ids" in attrs) == ("filter" in attrs):
            raise serializers.ValidationError("give exactly one of ids and filter")
        return attrs


# Responses.


class SubjectSerializer(serializers.Serializer):
    """The host's object a run is about (``start_run(subject=...)``)."""

    type = serializers.CharField(help_text="its model, as app_label.model")
    id = serializers.CharField(help_text="its primary key, as text")


class RunSerializer(serializers.ModelSerializer):
    """A run as a list shows it: what identifies it and where it stands."""

    workflow = serializers.CharField(source="workflow_name")
    subject = serializers.SerializerMethodField()
    schedule = serializers.CharField(
        source="schedule.key", allow_null=True, help_text="the key of the schedule that started it"
    )
    scheduled_for = serializers.DateTimeField(
        allow_null=True, help_text="the schedule's slot (or trigger instant) it was started for"
    )
    title = serializers.CharField(help_text="its title; empty: none given (show the workflow)")
    trigger = serializers.ChoiceField(
        choices=RunTrigger.choices, help_text="the surface that started it"
    )
    dismissed_at = serializers.DateTimeField(
        allow_null=True,
        help_text="when an operator dismissed the ended run (left out of default lists)",
    )
    tags = TagsObjectField(
        help_text="the run's tags (set at its start, inherited from its parent, changed "
        "by its steps with ctx.set_tags)"
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "workflow",
            "workflow_version",
            "status",
            "title",
            "trigger",
            "business_key",
            "tags",
            "dismissed_at",
            "subject",
            "parent_run",
            "created_at",
            "updated_at",
            "started_at",
            "finished_at",
            "deadline",
            "schedule",
            "scheduled_for",
        ]
        read_only_fields = fields

    @extend_schema_field(SubjectSerializer(allow_null=True))
    def get_subject(self, run: Run) -> dict[str, str] | None:
        """From the content-type cache, so a page of runs costs no query per run."""
        if run.subject_type_id is None:
            return None
        model = ContentType.objects.get_for_id(run.subject_type_id)
        return {"type": f"{model.app_label}.{model.model}", "id": run.subject_id}


class WaitingOnSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=HoldKind.choices,
        help_text="what holds the run (workflows.holds.HOLDS: how each reads, what releases "
        "it); details.message says some in words",
    )
    step = serializers.CharField(allow_null=True)
    details = serializers.DictField()


class ActionSerializer(serializers.Serializer):
    verb = serializers.CharField()
    step = serializers.CharField(allow_null=True, help_text="for a step verb: the step's name")
    step_id = serializers.IntegerField(allow_null=True)
    allowed = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True, help_text="why not, when not allowed")
    summary = serializers.CharField()


PROGRESS_HELP = "the last ctx.progress of its running or last attempt; null: none reported"
SUMMARY_HELP = "the summary document its attempts built with ctx.summary (JSON merge patches)"
FRAMES_WRITTEN_HELP = "the seq of its last log frame (ctx.log); frames are read at .../frames/"
FRAMES_DROPPED_HELP = "log frames trimmed by the per-attempt bound, oldest first"
ITERATION_HELP = (
    "the iteration the step holds, 1-based (a loop ran it again when above 1); every "
    "iteration at /runs/{id}/steps/{name}/iterations/"
)


UNIT_LOG_HELP = (
    "its newest log frames (ctx.log), each {seq, attempt, stream, text, at}; older ones "
    "are counted in frames_dropped"
)
ROUND_HELP = (
    "the round the step holds: a rerun, a retry or a loop's next iteration starts a new "
    "one, with empty progress, summary and frames; ended rounds at "
    "/runs/{id}/steps/{name}/rounds/"
)
ROUND_ATTEMPT_HELP = "the attempt of the current round, from 1 (0: none made yet)"
ROUND_MAX_HELP = "the attempts the current round may make"
ROUND_BEFORE_HELP = (
    "attempts made before the current round: the attempt as the step counts it on "
    "across rounds (the number a lease and an error carry) is attempt + this"
)


class RunStepSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField()
    attempt = serializers.IntegerField(help_text=ROUND_ATTEMPT_HELP)
    max_attempts = serializers.IntegerField(help_text=ROUND_MAX_HELP)
    round = serializers.IntegerField(help_text=ROUND_HELP)
    iteration = serializers.IntegerField(help_text=ITERATION_HELP)
    failure_class = serializers.ChoiceField(
        choices=FailureClass.choices,
        allow_null=True,
        help_text="why its last failed attempt failed; null if none failed",
    )
    last_failure = serializers.CharField(
        allow_null=True,
        help_text='"last attempt failed: <class>" while its last attempt is a failed one '
        "(the step failed, or waits for a retry); else null",
    )
    progress_done = serializers.FloatField(allow_null=True, help_text=PROGRESS_HELP)
    progress_total = serializers.FloatField(allow_null=True, help_text="null: unknown")
    progress_message = serializers.CharField(allow_blank=True)
    progress_at = serializers.DateTimeField(allow_null=True, help_text="when it was written")
    summary = serializers.DictField(help_text=SUMMARY_HELP)
    summary_version = serializers.IntegerField(help_text="how many patches made the summary")
    frames_written = serializers.IntegerField(help_text=FRAMES_WRITTEN_HELP)
    frames_dropped = serializers.IntegerField(help_text=FRAMES_DROPPED_HELP)


class RunDetailSerializer(RunSerializer):
    """A run with its input and outcome, and ``explain``'s reading of it.

    The instance is a run with ``explained`` set to its :class:`~workflows.queries.explain.
    Explanation`; ``version`` is the run row's compare-and-set version as ``explain``
    read it.
    """

    version = serializers.IntegerField(source="explained.version")
    attention = serializers.ChoiceField(choices=Attention.choices, source="explained.attention")
    as_of = serializers.DateTimeField(source="explained.as_of")
    waiting_on = WaitingOnSerializer(many=True, source="explained.waiting_on")
    allowed_actions = ActionSerializer(many=True, source="explained.allowed_actions")
    steps = RunStepSerializer(many=True, source="explained.steps")
    variables = serializers.DictField(
        help_text="the run's variables as committed: set at its start, changed by its "
        "steps' JSON merge patches (each write is a run.variables_set event)"
    )
    time_left = serializers.SerializerMethodField()
    deadline_passed = serializers.BooleanField(source="explained.deadline_passed")
    trace_id = serializers.SerializerMethodField(
        help_text="the OpenTelemetry trace the run's spans belong to (32 hex digits; empty "
        "when its start was not traced)"
    )
    started_by = serializers.SerializerMethodField(
        help_text="the user who started it (by the trigger's surface); null: code or the system"
    )
    dismissed_by = serializers.SerializerMethodField(
        help_text="the user who dismissed it; null: not dismissed, or by code"
    )

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "idempotency_key",
            "priority",
            "input",
            "variables",
            "output",
            "error",
            "version",
            "attention",
            "as_of",
            "waiting_on",
            "allowed_actions",
            "steps",
            "time_left",
            "deadline_passed",
            "trace_id",
            "started_by",
            "dismissed_by",
        ]
        read_only_fields = fields

    def get_trace_id(self, run: Run) -> str:
        return trace_id_of(run.traceparent)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_started_by(self, run: Run) -> str | None:
        return run.created_by.get_username() if run.created_by is not None else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_dismissed_by(self, run: Run) -> str | None:
        return run.dismissed_by.get_username() if run.dismissed_by is not None else None

    @extend_schema_field(
        serializers.FloatField(
            allow_null=True,
            help_text="seconds until the deadline as of as_of, negative once it passed; "
            "null without a deadline",
        )
    )
    def get_time_left(self, run: Any) -> float | None:
        left = run.explained.time_left
        return left.total_seconds() if left is not None else None


class PolledRunSerializer(RunDetailSerializer):
    """A run as ``GET /api/runs/{id}/`` answers it, a long poll with ``wait``: with
    ``timed_out`` set on the instance too (whether the wait ran out before the run
    ended)."""

    timed_out = timed_out_field()

    class Meta(RunDetailSerializer.Meta):
        fields = [*RunDetailSerializer.Meta.fields, "timed_out"]
        read_only_fields = fields


class CancelledRunSerializer(RunDetailSerializer):
    """A run after a cancel, and whether it had been cancelled already.

    The instance is what :class:`RunDetailSerializer` takes, with ``already`` set too.
    """

    already = serializers.BooleanField(
        help_text="true: the run was cancelling, cancelled or terminated already, and "
        "nothing changed; false: this request cancelled it"
    )

    class Meta(RunDetailSerializer.Meta):
        fields = [*RunDetailSerializer.Meta.fields, "already"]
        read_only_fields = fields


class DecisionValue(serializers.ChoiceField):
    """A gate's decision (or how it was made, with ``choices=DecisionVia.choices``, or a
    unit's failure class with ``choices=FailureClass.choices``), ``null`` until it has
    one: the model stores "none yet" as ``""``, which is not a decision and which the
    schema's enum of decisions does not hold."""

    def __init__(self, choices: Any = Decision.choices, **kwargs: Any) -> None:
        super().__init__(choices=choices, allow_null=True, read_only=True, **kwargs)

    # The stubs type ChoiceField's representation as str; DRF's own passes None through.
    def to_representation(self, value: str) -> str | None:  # type: ignore[override]
        return value or None


# The failure class of a unit's last failed attempt, null when none failed.
FAILURE_CLASS_HELP = (
    "why its last failed attempt failed: transient, permanent, timeout, lease_expired, "
    "revoked, cancelled or budget; null if no attempt failed"
)


class StepSerializer(serializers.ModelSerializer):
    """A step: its attempts and outcome, its gate's fields, its fan-out's counters."""

    failure_class = DecisionValue(choices=FailureClass.choices, help_text=FAILURE_CLASS_HELP)

    decision = DecisionValue(help_text="approved or rejected; null until the gate is decided")
    decided_via = DecisionValue(
        choices=DecisionVia.choices,
        help_text="how the gate was decided: decision, timeout, skip (by someone its rule "
        "admits) or override (a skip outside its rule); null until it is",
    )

    decided_by = serializers.CharField(
        source="decided_by.username", allow_null=True, default=None, read_only=True
    )
    claimed_by = serializers.CharField(
        source="claimed_by.username", allow_null=True, default=None, read_only=True
    )
    attempt = serializers.IntegerField(
        source="attempts_in_round.attempt", read_only=True, help_text=ROUND_ATTEMPT_HELP
    )
    max_attempts = serializers.IntegerField(
        source="attempts_in_round.max_attempts", read_only=True, help_text=ROUND_MAX_HELP
    )

    class Meta:
        model = Step
        fields = [
            "id",
            "run",
            "name",
            "kind",
            "status",
            "attempt",
            "max_attempts",
            "generation",
            "iteration",
            "round_attempts_before",
            "version",
            "lease_owner",
            "lease_expires_at",
            "output",
            "error",
            "failure_class",
            "created_at",
            "updated_at",
            "started_at",
            "finished_at",
            "prompt",
            "options",
            "min_selections",
            "max_selections",
            "permission",
            "assignees",
            "decision",
            "decided_via",
            "decided_by",
            "decided_at",
            "feedback",
            "selections",
            "claimed_by",
            "claimed_at",
            "signal_name",
            "items_total",
            "items_completed",
            "items_failed",
            "items_skipped",
            *STEP_TELEMETRY_FIELDS,
        ]
        read_only_fields = fields
        extra_kwargs = {
            "progress_done": {"help_text": PROGRESS_HELP},
            "summary": {"help_text": SUMMARY_HELP},
            "frames_written": {"help_text": FRAMES_WRITTEN_HELP},
            "frames_dropped": {"help_text": FRAMES_DROPPED_HELP},
            "iteration": {"help_text": ITERATION_HELP},
            "round": {"help_text": ROUND_HELP},
            "round_attempts_before": {"help_text": ROUND_BEFORE_HELP},
        }


class ItemSerializer(serializers.ModelSerializer):
    failure_class = DecisionValue(choices=FailureClass.choices, help_text=FAILURE_CLASS_HELP)

    class Meta:
        model = FanOutItem
        fields = [
            "id",
            "index",
            "key",
            "item",
            "status",
            "attempt",
            "max_attempts",
            "lease_owner",
            "lease_expires_at",
            "output",
            "error",
            "failure_class",
            "updated_at",
            "started_at",
            "finished_at",
            *UNIT_TELEMETRY_FIELDS,
        ]
        read_only_fields = fields
        extra_kwargs = {
            "progress_done": {"help_text": PROGRESS_HELP},
            "summary": {"help_text": "the summary its handler built with ctx.summary"},
            "log": {"help_text": UNIT_LOG_HELP},
            "frames_dropped": {"help_text": "log frames trimmed by the item's bound"},
        }


class RevokedSerializer(serializers.Serializer):
    """What a revoke did: whether this request took the lease (``revoked``, else
    ``reason``), and the unit, as it is now, and its step."""

    revoked = serializers.BooleanField(
        help_text="true: this request took the lease; false: nothing changed (see reason)"
    )
    reason = serializers.CharField(
        allow_null=True,
        help_text=(
            "why nothing changed: replaced (a newer attempt runs), not_started, "
            "already_revoked (a repeat), not_leased (the attempt ended); null when revoked"
        ),
    )
    revoked_attempt = serializers.IntegerField(help_text="the attempt the request named")
    kind = serializers.ChoiceField(choices=["step", "item", "compensation"])
    id = serializers.IntegerField(help_text="the step's, the item's or the compensation's id")
    item = serializers.CharField(
        allow_null=True, help_text="the item's key, for an item or an item's compensation"
    )
    status = serializers.CharField(
        help_text="ready: it runs again; cancelled or skipped when its run had stopped"
    )
    attempt = serializers.IntegerField(
        help_text="the unit's attempt now (a step's within its round)"
    )
    max_attempts = serializers.IntegerField(
        help_text="raised by one when revoked: the attempt is given back"
    )
    failure_class = serializers.CharField(help_text="revoked")
    error = serializers.JSONField(help_text="code revoked, by, reason, attempt, owner")
    step = StepSerializer()


class EventSerializer(serializers.ModelSerializer):
    seq = serializers.IntegerField(
        source="id", help_text="the event's id: give the last one received as after_seq"
    )
    step = serializers.CharField(
        source="step_name", allow_null=True, help_text="the step's name, if about a step"
    )

    class Meta:
        model = Event
        fields = ["seq", "type", "step", "payload", "created_at"]
        read_only_fields = fields


class SignalSerializer(serializers.Serializer):
    """A signal as :func:`workflows.queries.signal_summary` describes it."""

    id = serializers.IntegerField()
    run = serializers.UUIDField()
    name = serializers.CharField()
    payload = serializers.JSONField(allow_null=True)
    idempotency_key = serializers.CharField(allow_null=True)
    received_at = serializers.DateTimeField()
    consumed_by = serializers.CharField(
        allow_null=True, help_text="the step that consumed it; null while it waits"
    )


class BulkItemSerializer(serializers.Serializer):
    run = serializers.CharField()
    status = serializers.CharField(help_text="as read, or the new status once done")
    outcome = serializers.ChoiceField(choices=["eligible", "skipped", "done", "failed"])
    reason = serializers.CharField(help_text="why skipped, or the error of a failed run")
    code = serializers.CharField(help_text="the error's code, for a failed run")


class BulkResultSerializer(serializers.Serializer):
    """The shape ``workflows_bulk --json`` prints."""

    verb = serializers.CharField()
    dry_run = serializers.BooleanField()
    totals = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="matched, and eligible/skipped (dry run) or done/skipped/failed",
    )
    runs = BulkItemSerializer(many=True)
