"""Bodies of the external work endpoints (``/api/work/``), in and out.

Requests are strict as the other endpoints' are (:mod:`workflows.api.strict`): unknown
fields, strings that are not JSON strings, numbers that are not JSON numbers are 400s
naming the field before the verb is called. What only the verb can say (a queue or
worker name it does not take) is its 400 ``invalid_input``; a lease is never judged
here: any string goes to the verb, which refuses every bad one alike (409
``lease_lost``), so the answer tells a forger nothing.
"""

from __future__ import annotations

import math
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from workflows.api.long_poll import timed_out_field
from workflows.api.serializers_runs import Flag, JSONObjectField, StrictInteger
from workflows.api.strict import StrictCharField, StrictSerializer
from workflows.status import FrameStream, StepStatus
from workflows.workers.external import MAX_LIMIT, MAX_WAIT, WORKER_CLASSES

# Far more queues or capabilities than any worker serves, and few enough that a body
# cannot make one claim read the ready steps of thousands of routes.
_MOST_NAMES = 50


def _names(help_text: str, **kwargs: Any) -> serializers.ListField:
    return serializers.ListField(
        child=StrictCharField(max_length=200), max_length=_MOST_NAMES, help_text=help_text, **kwargs
    )


def _lease() -> StrictCharField:
    return StrictCharField(
        allow_blank=True, help_text="the job's lease, as the claim handed it out"
    )


def _finite(value: Any) -> bool:
    """A JSON number (not a boolean) that is finite and 0 or more: ``1e400`` parses as
    infinity, and a huge integer overflows a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value)) and value >= 0
    except OverflowError:
        return False


@extend_schema_field(
    {
        "oneOf": [
            {"type": "number", "minimum": 0, "description": "how much is done"},
            {
                "type": "array",
                "items": {"type": "number", "minimum": 0},
                "minItems": 2,
                "maxItems": 2,
                "description": "[done, total]",
            },
        ],
        "nullable": True,
    }
)
class ProgressField(serializers.Field):
    """How much of the work is done: a number, ``[done, total]``, or ``null`` (none
    reported); each a finite number of 0 or more."""

    default_error_messages = {
        "invalid": "expected a number of 0 or more, [done, total], or null",
    }

    def to_internal_value(self, data: Any) -> float | tuple[float, float]:
        if isinstance(data, list) and len(data) == 2 and all(_finite(part) for part in data):
            return (data[0], data[1])
        if not _finite(data):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> Any:
        return list(value) if isinstance(value, tuple) else value


class WaitField(serializers.FloatField):
    """Seconds to wait for work, a JSON number from 0 to :data:`MAX_WAIT`; ``"5"`` and
    ``true`` are refused rather than coerced."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


# Requests.


class WorkClaimSerializer(StrictSerializer):
    queues = _names("the queues this worker serves", allow_empty=False)
    worker = StrictCharField(
        max_length=120,
        help_text="this worker's name (letters, digits, '_ . : @ / -'): shown as the "
        "attempt's owner, and its throttling budget",
    )
    limit = StrictInteger(
        required=False,
        default=1,
        min_value=1,
        max_value=MAX_LIMIT,
        help_text="the most jobs to claim at once",
    )
    capabilities = _names(
        "what this worker has: it gets only steps whose requires= these cover",
        required=False,
        default=list,
    )
    wait = WaitField(
        required=False,
        default=0,
        min_value=0,
        max_value=MAX_WAIT,
        help_text=f"long poll: with nothing ready, wait up to this many seconds (0 to "
        f"{MAX_WAIT:g}) for work to become ready",
    )


class WorkHeartbeatSerializer(StrictSerializer):
    lease = _lease()
    progress = ProgressField(required=False, allow_null=True, default=None)
    message = StrictCharField(
        required=False, allow_blank=True, default="", help_text="what is being done now"
    )


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {"type": "string", "maxLength": 255, "nullable": True},
        "example": {"printer": "p-7", "draft": None},
    }
)
class TagsPatchField(serializers.JSONField):
    """A patch of a run's tags: keys matching ``^[a-z][a-z0-9_.-]{0,63}$``, each set to a
    string of at most 255 characters or to ``null`` (removed); anything else is refused
    by the engine (400 ``invalid_input`` naming the tag)."""


class WorkCompleteSerializer(StrictSerializer):
    lease = _lease()
    output = serializers.JSONField(allow_null=True, help_text="the step's output (any JSON)")
    variables = JSONObjectField(
        required=False,
        help_text="a JSON merge patch of the run's variables, committed with the output "
        "(as ctx.set_variables); past MAX_VARIABLES_BYTES: 400 invalid_input, nothing written",
    )
    tags = TagsPatchField(
        required=False,
        help_text="a patch of the run's tags (a value null removes the key), committed with "
        "the output (as ctx.set_tags); a bad tag or more than 32 tags: 400 invalid_input "
        "naming the tag, nothing written",
    )


class WorkFailSerializer(StrictSerializer):
    lease = _lease()
    error = StrictCharField(help_text="why the work failed (kept up to 4000 characters)")
    permanent = Flag(required=False, default=False, help_text="do not retry")
    failure_class = serializers.ChoiceField(
        choices=list(WORKER_CLASSES),
        required=False,
        allow_null=True,
        default=None,
        help_text="transient (the default: retried per the task's policy), permanent "
        "(never retried) or timeout",
    )


class WorkLogSerializer(StrictSerializer):
    lease = _lease()
    text = StrictCharField(allow_blank=True, help_text="one line (or more) of the log")
    stream = serializers.ChoiceField(
        choices=FrameStream.values, required=False, default=FrameStream.STDOUT
    )


# Responses.


class WorkJobSerializer(serializers.Serializer):
    """One claimed attempt of an external step, and everything its worker needs."""

    lease = serializers.CharField(
        help_text="opaque and signed: every later call presents it; useless once the "
        "attempt is over"
    )
    run = serializers.UUIDField()
    workflow = serializers.CharField()
    workflow_version = serializers.IntegerField()
    step = serializers.CharField()
    queue = serializers.CharField()
    attempt = serializers.IntegerField(help_text="this attempt, counted within the step's round")
    max_attempts = serializers.IntegerField()
    idempotency_key = serializers.CharField(
        help_text="the same for every attempt of the step: send it to what the work calls"
    )
    input = serializers.JSONField(help_text="the run's input")
    steps = serializers.JSONField(help_text="the outputs of the completed upstream steps, by name")
    lease_expires_at = serializers.DateTimeField(help_text="heartbeat before it")
    deadline = serializers.DateTimeField(
        allow_null=True, help_text="when the run must have ended, if it must"
    )
    timeout = serializers.FloatField(help_text="seconds each heartbeat extends the lease by")
    traceparent = serializers.CharField(
        help_text="the W3C traceparent of the run's start: start the work's own spans under "
        "it to join the run's trace (empty when the run is not traced)"
    )


class WorkClaimedSerializer(serializers.Serializer):
    jobs = WorkJobSerializer(many=True)
    timed_out = timed_out_field()


class WorkHeartbeatAnswerSerializer(serializers.Serializer):
    lease_expires_at = serializers.DateTimeField(help_text="the lease's new expiry")


class WorkCompleteAnswerSerializer(serializers.Serializer):
    duplicate = serializers.BooleanField(
        help_text="true: the attempt had already completed with this output; nothing "
        "was written again"
    )


class WorkFailAnswerSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=[StepStatus.RETRY_SCHEDULED, StepStatus.FAILED],
        help_text="retry_scheduled: another attempt follows; failed: the step failed",
    )


class WorkLoggedSerializer(serializers.Serializer):
    """An empty object: the line was kept."""
