"""Schedules the console's tests, browser test and screenshots show: a nightly cron in
Berlin with past runs, an interval paused with a note, and an hourly schedule whose
second slot met its first run still waiting (skipped)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from tests.support.workflows import Held, Work
from workflows import backfill_schedule, create_schedule
from workflows.models import Run, Schedule
from workflows.testing import run_pending
from workflows.workers.schedule_slots import fire_due_schedules


@dataclass(frozen=True)
class Samples:
    nightly: Schedule
    paused: Schedule
    held: Schedule


def make_samples() -> Samples:
    """The three schedules, their runs and events (runs advanced in-process)."""
    nightly = create_schedule(Work, key="nightly-report", cron="0 2 * * *", tz="Europe/Berlin")
    # A minute back: the database's clock, which refuses an end in the future, may lag.
    end = timezone.now() - timedelta(minutes=1)
    backfill_schedule(nightly.key, end - timedelta(days=3), end)
    paused = create_schedule(
        Work,
        key="supplier-sync",
        every=timedelta(minutes=5),
        paused=True,
        note="Supplier API down for maintenance until Monday",
    )
    held = create_schedule(Held, key="hourly-approval", every=timedelta(hours=1))
    first = Schedule.objects.get(pk=held.pk).next_fire_at
    assert first is not None
    fire_due_schedules(now=first)
    fire_due_schedules(now=first + timedelta(hours=1))
    run_pending()
    return Samples(
        Schedule.objects.get(pk=nightly.pk),
        Schedule.objects.get(pk=paused.pk),
        Schedule.objects.get(pk=held.pk),
    )


def runs_of(schedule: Schedule) -> list[Run]:
    """The schedule's runs, oldest slot first."""
    return list(Run.objects.filter(schedule_id=schedule.pk).order_by("scheduled_for"))
