"""Bodies of the schedule endpoints, in and out.

Requests are strict as the other endpoints' are (:mod:`workflows.api.strict`): unknown
fields, strings that are not JSON strings and moments without an offset are 400s naming
the field before the engine is asked. What only the schedule's specification can say
(a cron expression, a time zone, a positive interval, exactly one of ``cron`` and
``every``, an input the workflow takes) the service checks, and its refusal is a 400
``invalid_input`` naming the field. Spans are given as deadlines are: seconds (a JSON
number) or an ISO 8601 duration (``PT5M``), and answered in seconds.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime, parse_duration
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from workflows.api.serializers_runs import JSONObjectField
from workflows.api.strict import StrictCharField, StrictSerializer
from workflows.definitions.schedules import OVERLAP_POLICIES
from workflows.definitions.schedules.spec import MAX_KEY_LENGTH
from workflows.status import RunStatus

# The moments a schedule's calendar is computed over: far wider than any schedule needs,
# and far enough inside Python's calendar that a slot after the last one or a minute
# before the first one is still a date (year 1 and 9999 overflow while iterating).
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
# Far beyond any span a schedule takes (the specification allows ten years), and still
# a timedelta: larger numbers are refused here rather than overflowing.
_LARGEST_SPAN_SECONDS = 10**10


@extend_schema_field(
    {
        "oneOf": [
            {"type": "number", "description": "seconds"},
            {"type": "string", "description": "an ISO 8601 duration (PT5M, P1D)"},
        ]
    }
)
class SpanField(serializers.Field):
    """A span of time: seconds (a JSON number) or an ISO 8601 duration; answered in
    seconds. Whether it is long enough is the specification's to say."""

    default_error_messages = {
        "invalid": "expected seconds (a number) or an ISO 8601 duration such as PT5M",
        "too_long": f"a span is at most {_LARGEST_SPAN_SECONDS} seconds",
    }

    def to_internal_value(self, data: Any) -> timedelta:
        if isinstance(data, int | float) and not isinstance(data, bool):
            if not math.isfinite(data):
                self.fail("invalid")
            if abs(data) > _LARGEST_SPAN_SECONDS:
                self.fail("too_long")
            return timedelta(seconds=data)
        if not isinstance(data, str) or "\x00" in data:
            self.fail("invalid")
        try:
            span = parse_duration(data)
        except (OverflowError, ValueError):
            self.fail("too_long")
        if span is None:
            self.fail("invalid")
        return span

    def to_representation(self, value: timedelta) -> float:
        return value.total_seconds()


@extend_schema_field({"type": "string", "format": "date-time"})
class MomentField(serializers.Field):
    """An ISO 8601 date and time with its offset, handed on in UTC; a moment without an
    offset is refused (whose midnight would it be?)."""

    default_error_messages = {
        "invalid": "expected an ISO 8601 date and time with its offset (2026-01-06T02:00:00+01:00)",
        "naive": "give the moment's offset (Z or +01:00)",
        "range": f"a moment from {EARLIEST.year} to {LATEST.year - 1}",
    }

    def to_internal_value(self, data: Any) -> datetime:
        if not isinstance(data, str) or "\x00" in data:
            self.fail("invalid")
        try:
            moment = parse_datetime(data)
        except ValueError:
            moment = None
        if moment is None:
            self.fail("invalid")
        if moment.tzinfo is None or moment.utcoffset() is None:
            self.fail("naive")
        try:
            moment = moment.astimezone(UTC)
        except OverflowError:
            self.fail("range")
        if not EARLIEST <= moment < LATEST:
            self.fail("range")
        return moment

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


def _overlap(**kwargs: Any) -> serializers.ChoiceField:
    return serializers.ChoiceField(
        choices=list(OVERLAP_POLICIES),
        help_text="what a slot does while an earlier run of the schedule has not ended",
        **kwargs,
    )


# Requests.


class _ScheduleSpecFields(StrictSerializer):
    """The fields of a schedule's specification that creating and changing share."""

    cron = StrictCharField(
        required=False,
        max_length=200,
        help_text="five fields (minute hour day-of-month month day-of-week); "
        "exactly one of cron and every",
    )
    every = SpanField(
        required=False,
        allow_null=True,
        help_text="an interval: slots at start_at + n * every; exactly one of cron and every",
    )
    tz = StrictCharField(
        required=False, max_length=64, help_text="the IANA zone of the cron expression's times"
    )
    input = JSONObjectField(required=False, help_text="each run's input")
    overlap = _overlap(required=False)
    catchup_window = SpanField(
        required=False, help_text="after downtime, slots this recent start; older ones are missed"
    )
    jitter = SpanField(
        required=False, allow_null=True, help_text="delay each slot's start by up to this"
    )
    start_at = MomentField(required=False, allow_null=True, help_text="no slot before it")
    end_at = MomentField(required=False, allow_null=True, help_text="no slot from it on")
    note = StrictCharField(
        required=False, allow_blank=True, max_length=2000, help_text="a remark shown with it"
    )


class CreateScheduleSerializer(_ScheduleSpecFields):
    key = StrictCharField(
        max_length=MAX_KEY_LENGTH,
        help_text="your own unique key: the same specification again returns the schedule "
        "(200), another is 409 idempotency_conflict (change it with PATCH)",
    )
    workflow = StrictCharField(max_length=200, help_text="a registered workflow name")
    paused = serializers.BooleanField(required=False, help_text="make it paused")


class UpdateScheduleSerializer(_ScheduleSpecFields):
    """What PATCH changes: giving cron clears every and the reverse; a changed calendar
    starts from its first slot after now."""


class PauseScheduleSerializer(StrictSerializer):
    note = StrictCharField(
        required=False, allow_blank=True, max_length=2000, default="", help_text="why"
    )


class BackfillSerializer(StrictSerializer):
    start = MomentField(help_text="the first slot's earliest instant (included)")
    end = MomentField(help_text="the end of the range (excluded); not in the future")
    dry_run = serializers.BooleanField(
        required=False, default=False, help_text="count the slots; start nothing"
    )


# Responses.


class ScheduleSerializer(serializers.Serializer):
    """A schedule, its calendar, and where its firing stands."""

    key = serializers.CharField()
    workflow = serializers.CharField()
    cron = serializers.CharField(help_text="empty for an interval")
    every = serializers.FloatField(allow_null=True, help_text="seconds; null for a cron")
    tz = serializers.CharField()
    input = serializers.JSONField()
    overlap = serializers.ChoiceField(choices=list(OVERLAP_POLICIES))
    catchup_window = serializers.FloatField(help_text="seconds")
    jitter = serializers.FloatField(allow_null=True, help_text="seconds")
    start_at = serializers.DateTimeField(allow_null=True)
    end_at = serializers.DateTimeField(allow_null=True)
    paused = serializers.BooleanField()
    note = serializers.CharField()
    origin = serializers.ChoiceField(
        choices=["operator", "code"], help_text="code: declared in a workflow class"
    )
    spec_in_words = serializers.CharField()
    next_fire_times = serializers.ListField(
        child=serializers.DateTimeField(), help_text="the next three slots, in UTC"
    )
    next_slot_at = serializers.DateTimeField(
        allow_null=True, help_text="the next slot not decided yet; null past end_at"
    )
    fired_count = serializers.IntegerField()
    skipped_count = serializers.IntegerField()
    missed_count = serializers.IntegerField()
    buffered = serializers.ListField(
        child=serializers.DateTimeField(), help_text="slots waiting for an earlier run to end"
    )
    last_run = serializers.UUIDField(allow_null=True)
    last_run_status = serializers.ChoiceField(choices=RunStatus.choices, allow_null=True)
    last_fired_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class BackfillResultSerializer(serializers.Serializer):
    slots = serializers.IntegerField(help_text="slots in the range")
    started = serializers.ListField(
        child=serializers.UUIDField(), help_text="the runs started now, oldest slot first"
    )
    existing = serializers.IntegerField(help_text="slots that had their run already")
    would_start = serializers.IntegerField(help_text="with dry_run: the runs it would start")
