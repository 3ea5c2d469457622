"""A deadline typed into a console form: the start page's and the replays' (retry, rerun).

One field, so that every form reads a deadline as the API does
(:func:`~workflows.definitions.deadline.parse_deadline`) and refuses the same values
with the same words (:func:`~workflows.definitions.deadline.deadline_problems`), as an
error on the field.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.utils import timezone

from workflows.definitions.deadline import deadline_problems, parse_deadline

__all__ = ["DEADLINE_FORMS", "DeadlineField", "shown_deadline"]

DEADLINE_FORMS = (
    "seconds from now, an ISO 8601 duration (PT30M) or date and time with its offset "
    "(2026-12-24T18:00:00+01:00)"
)
"""What the field accepts, in words for its help text."""


def shown_deadline(moment: datetime) -> str:
    """A deadline as the field shows it, and reads it back: the local moment, to the
    second, with its offset."""
    return timezone.localtime(moment).isoformat(timespec="seconds")


class DeadlineField(forms.CharField):
    """Optional text read as a deadline: ``None`` when empty, else a ``timedelta`` (from
    now) or an aware ``datetime``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, max_length=64, **kwargs)

    def clean(self, value: Any) -> timedelta | datetime | None:
        text = super().clean(value)
        if not text:
            return None
        try:
            deadline = parse_deadline(text)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        problems = deadline_problems(deadline)
        if problems:
            raise forms.ValidationError(problems[0])
        return deadline
