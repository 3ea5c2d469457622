"""What the surfaces show of a schedule: its calendar in words, its events and its runs.

Reads only: the verbs that change a schedule are :mod:`workflows.services.schedules`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from cronsim import CronSim
from django.db.models import QuerySet

from workflows.models import Event, Run, Schedule


def describe_spec(schedule: Schedule) -> str:
    """The calendar in words, as a person reads it on a list: cronsim's explanation of a
    cron expression (“At 02:00 every day”), “every N minutes” for an interval."""
    if schedule.cron:
        return str(CronSim(schedule.cron, datetime.now()).explain())
    assert schedule.every is not None
    return f"every {_interval(schedule.every)}"


def _interval(every: timedelta) -> str:
    seconds = int(every.total_seconds())
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    return str(every)


def schedule_events(schedule: Schedule) -> QuerySet[Event]:
    """The schedule's events (``schedule.*``), newest first."""
    return Event.objects.filter(schedule_id=schedule.pk).order_by("-id")


def schedule_runs(schedule: Schedule) -> QuerySet[Run]:
    """The runs the schedule started (its slots, triggers and backfills), newest slot
    first; large columns left out."""
    return (
        Run.objects.filter(schedule_id=schedule.pk)
        .defer("input", "output", "snapshot", "error")
        .order_by("-scheduled_for", "-created_at")
    )
