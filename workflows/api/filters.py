"""Query-string filters of the run, event and item lists (django-filter).

A value that does not parse (an unknown status, a date that is not ISO 8601) is a 400
naming the parameter, never an empty list: a filter that silently matches nothing
reads as "there are no such runs". :class:`RunFilter` knows nothing of HTTP and can
filter any ``Run`` queryset, the admin's list included.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django import forms
from django.core.validators import RegexValidator
from django.db.models import QuerySet
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field

from workflows.errors import InvalidInput
from workflows.models import FanOutItem, Run
from workflows.queries import Attention, dismissed_filter, runs_needing_attention
from workflows.queries.deadlines import near_deadline
from workflows.queries.tags import tagged
from workflows.status import RunStatus, RunTrigger, StepStatus
from workflows.tags import parse_tags

# ``?dismissed=``: runs an operator dismissed are left out unless asked for.
DISMISSED_CHOICES = [
    ("no", "runs not dismissed (the default)"),
    ("yes", "dismissed runs only"),
    ("all", "every run, dismissed or not"),
]

# The widest ``near_deadline`` window (seconds): a hundred years, the longest deadline.
MAX_NEAR_DEADLINE = 100 * 365 * 86400


class WholeSeconds(filters.NumberFilter):
    """A whole number of seconds (NumberFilter alone would take ``1.5``)."""

    field_class = forms.IntegerField


class UtcDateTimeField(IsoDateTimeField):
    """An ISO 8601 moment, handed on in UTC: PostgreSQL refuses a UTC offset past ±15:59
    (``+19:47`` parses in Python), and a moment whose UTC form leaves the calendar
    (``9999-12-31T23:00-05:00``) is refused here, naming the parameter."""

    def to_python(self, value: Any) -> datetime | None:
        moment = super().to_python(value)
        if moment is None:
            return None
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError(
                "this moment is out of the range of dates in UTC", code="invalid"
            ) from None


class UtcDateTimeFilter(filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


def any_status(choices: list[tuple[str, str]]) -> filters.MultipleChoiceFilter:
    """``?status=a&status=b``: the rows in any of the statuses given, one of ``choices``."""
    # Not ``distinct`` (django-filter's default for a multiple choice): the status is
    # the row's own column, so no row can match twice, and a ``SELECT DISTINCT`` sorts
    # every matching row (a fifth of a second over 50,000 failed runs) to show a page.
    return filters.MultipleChoiceFilter(
        choices=choices, distinct=False, help_text="repeat for any of several statuses"
    )


class TagsField(forms.MultipleChoiceField):
    """``?tag=customer:acme&tag=region:eu``: every value a ``key:value`` tag
    (:func:`workflows.tags.parse_tag`), cleaned to one mapping; a malformed one is
    refused naming it. No choices: any well-formed tag may be asked for."""

    def valid_value(self, value: str) -> bool:
        return True

    def clean(self, value: Any) -> dict[str, str]:
        texts = super().clean(value)
        try:
            return parse_tags(texts or [])
        except InvalidInput as refused:
            # As a parameter: the message quotes the caller's text, which may hold a "%".
            raise forms.ValidationError(
                "%(problem)s", code="invalid", params={"problem": refused.message}
            ) from None


class TagsFilter(filters.MultipleChoiceFilter):
    """The runs carrying every tag given (:func:`workflows.queries.tags.tagged`)."""

    field_class = TagsField


# What the schema says of one ``tag`` value (the filter makes it an exploded array).
TAG_SCHEMA = {
    "type": "string",
    "pattern": r"^[a-z][a-z0-9_.-]{0,63}:",
    "maxLength": 64 + 1 + 255,
    "example": "customer:acme",
    "description": "key:value, e.g. customer:acme: runs carrying this tag; repeat for runs "
    "carrying every one of several (a malformed one is a 400 naming it)",
}


class RunFilter(filters.FilterSet):
    status = any_status(RunStatus.choices)
    workflow = filters.CharFilter(field_name="workflow_name", help_text="the workflow's name")
    business_key = filters.CharFilter()
    subject_type = filters.CharFilter(
        method="filter_subject_type",
        validators=[RegexValidator(r"^\w+\.\w+$", "expected app_label.model, e.g. shop.order")],
        help_text="the subject's model, as app_label.model",
    )
    subject_id = filters.CharFilter(help_text="the subject's primary key, as text")
    attention = filters.ChoiceFilter(
        choices=Attention.choices,
        method="filter_attention",
        help_text="runs whose attention class (as explain gives it) is this one",
    )
    created_after = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")
    deadline_before = UtcDateTimeFilter(
        field_name="deadline",
        lookup_expr="lt",
        help_text="runs whose deadline falls before this moment (ISO 8601)",
    )
    deadline_after = UtcDateTimeFilter(
        field_name="deadline",
        lookup_expr="gte",
        help_text="runs whose deadline falls at or after this moment (ISO 8601)",
    )
    schedule = filters.CharFilter(
        field_name="schedule__key", help_text="runs started by the schedule with this key"
    )
    scheduled_after = UtcDateTimeFilter(
        field_name="scheduled_for",
        lookup_expr="gte",
        help_text="runs of a schedule's slot at or after this moment (ISO 8601)",
    )
    scheduled_before = UtcDateTimeFilter(
        field_name="scheduled_for",
        lookup_expr="lt",
        help_text="runs of a schedule's slot before this moment (ISO 8601)",
    )
    trigger = filters.ChoiceFilter(
        choices=RunTrigger.choices, help_text="runs started by this surface"
    )
    dismissed = filters.ChoiceFilter(
        choices=DISMISSED_CHOICES,
        method="filter_dismissed",
        help_text="no (the default): leave out runs an operator dismissed; yes: only "
        "those; all: both",
    )
    tag = TagsFilter(method="filter_tags", help_text=TAG_SCHEMA["description"])
    near_deadline = WholeSeconds(
        method="filter_near_deadline",
        min_value=0,
        max_value=MAX_NEAR_DEADLINE,
        help_text="runs not over whose deadline falls within this many seconds from now, "
        "or has passed already",
    )

    class Meta:
        model = Run
        fields = ["status", "workflow", "business_key", "subject_type", "subject_id", "attention"]

    def filter_queryset(self, queryset: QuerySet[Run]) -> QuerySet[Run]:
        """The filters given, and without ``dismissed``, its default: not dismissed."""
        runs = super().filter_queryset(queryset)
        if not self.form.cleaned_data.get("dismissed"):
            runs = dismissed_filter(runs, "no")
        return runs

    @extend_schema_field(TAG_SCHEMA)
    def filter_tags(self, runs: QuerySet[Run], name: str, value: dict[str, str]) -> QuerySet[Run]:
        """The runs carrying the tags (:func:`workflows.queries.tags.tagged`), told the
        statuses the list is filtered to."""
        return tagged(runs, value, self.form.cleaned_data.get("status") or ())

    def filter_dismissed(self, runs: QuerySet[Run], name: str, value: str) -> QuerySet[Run]:
        return dismissed_filter(runs, value)

    def filter_near_deadline(self, runs: QuerySet[Run], name: str, value: int) -> QuerySet[Run]:
        """The predicate the console's deadline filter uses too."""
        return runs.filter(near_deadline(timedelta(seconds=int(value))))

    def filter_attention(self, runs: QuerySet[Run], name: str, value: str) -> QuerySet[Run]:
        """In SQL, with the predicates ``explain`` uses, so the two never disagree."""
        return runs_needing_attention(value, runs=runs)

    def filter_subject_type(self, runs: QuerySet[Run], name: str, value: str) -> QuerySet[Run]:
        """``app_label.model`` as the run representation gives it (a malformed value is
        refused by the field's validator); an unknown model matches no run."""
        app_label, _, model = value.partition(".")
        return runs.filter(subject_type__app_label=app_label, subject_type__model=model.lower())


class ItemFilter(filters.FilterSet):
    status = any_status(StepStatus.choices)

    class Meta:
        model = FanOutItem
        fields = ["status"]
