"""Schedules as surfaces read them: the list, a schedule's calendar in words, its latest
runs.

:func:`describe_spec` is the one wording of a calendar, so the admin, the API and the
command say the same thing of one schedule.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from cronsim import CronSim
from django.db.models import QuerySet

from workflows.definitions.schedules import ScheduleSpec, next_fire_times
from workflows.engine.sql.clock import database_now
from workflows.models import Event, Run, Schedule

_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def describe_spec(schedule: Schedule | ScheduleSpec) -> str:
    """The calendar of ``schedule`` in words: cronsim's explanation of a cron expression
    (``At 02:00 every day``, with its zone unless UTC), or ``every 5 minutes``."""
    if schedule.cron:
        words = CronSim(schedule.cron, datetime.now()).explain()
        return words if schedule.tz == "UTC" else f"{words} ({schedule.tz})"
    return interval_words(schedule.every) if schedule.every is not None else ""


def interval_words(every: timedelta) -> str:
    """``every minute``, ``every 90 seconds``, ``every 2 hours``: the largest unit that
    divides the interval evenly."""
    seconds = int(every.total_seconds())
    for unit, size in _UNITS:
        if seconds % size == 0 and seconds >= size:
            count = seconds // size
            return f"every {unit}" if count == 1 else f"every {count} {unit}s"
    return f"every {every.total_seconds():g} seconds"


def schedule_facts(schedule: Schedule, now: datetime | None = None) -> dict[str, Any]:
    """A schedule as the API answers it and ``workflows_schedule --json`` prints it: its
    specification (spans in seconds), in words too, and where its firing stands. ``now``
    (default: the database clock, read once a call) is what its next fire times follow:
    a list reads the clock once and passes it to each."""
    last_run = schedule.last_run
    return {
        "key": schedule.key,
        "workflow": schedule.workflow_name,
        "cron": schedule.cron,
        "every": _seconds(schedule.every),
        "tz": schedule.tz,
        "input": schedule.input,
        "overlap": schedule.overlap,
        "catchup_window": _seconds(schedule.catchup_window),
        "jitter": _seconds(schedule.jitter),
        "start_at": schedule.start_at,
        "end_at": schedule.end_at,
        "paused": schedule.paused,
        "note": schedule.note,
        "origin": schedule.origin,
        "spec_in_words": describe_spec(schedule),
        "next_fire_times": next_fire_times(schedule, 3, now or database_now()),
        "next_slot_at": schedule.next_slot_at,
        "fired_count": schedule.fired_count,
        "skipped_count": schedule.skipped_count,
        "missed_count": schedule.missed_count,
        "buffered": schedule.buffered_slots(),
        "last_run": last_run.pk if last_run else None,
        "last_run_status": last_run.status if last_run else None,
        "last_fired_at": schedule.last_fired_at,
        "created_at": schedule.created_at,
        "updated_at": schedule.updated_at,
    }


def _seconds(span: timedelta | None) -> float | None:
    return None if span is None else span.total_seconds()


def list_schedules() -> QuerySet[Schedule]:
    """Every schedule by key, with its last run read in the same query."""
    return Schedule.objects.select_related("last_run").order_by("key")


def latest_runs(schedule: Schedule, limit: int = 5) -> QuerySet[Run]:
    """The schedule's runs, the latest slot first."""
    return Run.objects.filter(schedule=schedule).order_by("-scheduled_for", "-created_at")[:limit]


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
