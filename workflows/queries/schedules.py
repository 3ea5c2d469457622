"""Schedules as surfaces read them: the list, and a schedule's calendar in words.

:func:`describe_spec` is the one wording of a calendar, so the admin, the API and the
command say the same thing of one schedule.
"""

from __future__ import annotations

from datetime import datetime

from cronsim import CronSim
from django.db.models import QuerySet

from workflows.definitions.schedules import ScheduleSpec
from workflows.models import Schedule
from workflows.text import duration


def describe_spec(schedule: Schedule | ScheduleSpec) -> str:
    """The calendar in words: cronsim's reading of a cron expression with its zone
    (``At 02:00 every day, Europe/Berlin time``), or ``Every 5 minutes`` for an
    interval."""
    spec = schedule.spec() if isinstance(schedule, Schedule) else schedule
    if spec.cron:
        words = CronSim(spec.cron, datetime.now()).explain()
        return words if spec.tz == "UTC" else f"{words}, {spec.tz} time"
    if spec.every is None:
        return ""
    return f"Every {duration(spec.every, depth=3)}"


def list_schedules() -> QuerySet[Schedule]:
    """Every schedule by key, with its last run read in the same query."""
    return Schedule.objects.select_related("last_run").order_by("key")
