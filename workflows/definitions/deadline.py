"""A run's deadline as declared: what ``Workflow.deadline`` and ``start_run(deadline=)`` take.

A plain value, checked here once for the class statement, the Python verbs and every
surface: a positive :class:`~datetime.timedelta` (counted from the start, on the
database clock), or for a start a timezone-aware :class:`~datetime.datetime`. Whether a
moment is still in the future is the engine's to say, on the database clock, in the
transaction that starts the run.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.utils.dateparse import parse_datetime, parse_duration

from workflows.text import duration

# The furthest a deadline may lie: beyond it ``now + deadline`` leaves the calendar a
# database stores, and no run is meant to wait that long.
MAX_DEADLINE = timedelta(days=100 * 365)


def deadline_problems(value: object, *, moment_allowed: bool = True) -> list[str]:
    """What is wrong with ``value`` as a deadline; empty when it is a good one.

    ``moment_allowed``: a :class:`datetime` is a deadline of one run (``start_run``), not
    of a workflow, whose runs start at any time (``Workflow.deadline``).
    """
    if isinstance(value, timedelta):
        if value <= timedelta(0):
            return [f"deadline must be a positive duration, got {duration(value)}"]
        if value > MAX_DEADLINE:
            return [
                f"deadline must be at most {duration(MAX_DEADLINE, depth=1)}, got {duration(value)}"
            ]
        return []
    if isinstance(value, datetime) and moment_allowed:
        if value.tzinfo is None or value.utcoffset() is None:
            return [
                f"deadline {value.isoformat()} has no timezone: give an aware datetime "
                "(e.g. with tzinfo=datetime.timezone.utc)"
            ]
        return []
    expected = "a timedelta or a timezone-aware datetime" if moment_allowed else "a timedelta"
    return [f"deadline must be {expected}, got {type(value).__name__} {value!r}"]


def parse_deadline(value: object) -> timedelta | datetime:
    """A deadline from the outside: a number of seconds (a JSON number, or text such as
    ``"3600"``), an ISO 8601 duration (``"PT30M"``, ``"P2D"``) or an ISO 8601 moment with
    its offset (``"2026-12-24T18:00:00+01:00"``).

    Raises :class:`ValueError` saying what it expects; whether the value is a good
    deadline (positive, aware, not too far) is :func:`deadline_problems`'s to say.
    """
    expected = (
        "seconds, an ISO 8601 duration (PT30M) or an ISO 8601 date and time with its "
        "offset (2026-12-24T18:00:00+01:00)"
    )
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"a deadline is {expected}, got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > MAX_DEADLINE.total_seconds() * 2:
            raise ValueError(f"a deadline is {expected}, got {value!r}")
        return timedelta(seconds=value)
    text = value.strip()
    try:
        moment = parse_datetime(text) if "T" in text or " " in text else None
    except ValueError:
        moment = None
    if moment is not None:
        return moment
    try:
        duration = parse_duration(text)
    except (ValueError, OverflowError):
        duration = None
    if duration is None:
        raise ValueError(f"a deadline is {expected}, got {value!r}")
    return duration
