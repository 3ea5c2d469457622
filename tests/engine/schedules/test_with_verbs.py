"""Schedules composed with the operator verbs and the run limit: a verb that ends a
schedule's run lets its waiting slot start, one that revives an ended run makes the
overlap policy see it again, a paused run is still live (and is stopped by the
``*_other`` policies), and a run the workflow's limit queues is live too."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.handlers import WORK
from tests.support.workflows import Broken, Held
from workflows import (
    Task,
    WaitForSignal,
    Workflow,
    cancel_run,
    create_schedule,
    pause_run,
    retry_run,
    send_signal,
)
from workflows.models import Event, Run, Schedule
from workflows.status import RunStatus
from workflows.testing import run_pending
from workflows.workers.schedule_slots import fire_due_schedules

pytestmark = pytest.mark.django_db

MINUTE = timedelta(minutes=1)


class OneAtATime(Workflow):
    """Waits for a signal; at most one run at a time (the others wait ``queued``)."""

    name = "schedules_one_at_a_time"
    max_concurrent_runs = 1
    go = WaitForSignal("go")
    done = Task(WORK)


def fire(key: str) -> None:
    """One pass at the moment the schedule's next slot fires."""
    fire_due_schedules(now=Schedule.objects.get(key=key).next_fire_at)


def runs_of(key: str) -> list[Run]:
    return list(Run.objects.filter(schedule__key=key).order_by("scheduled_for"))


def test_cancelling_the_live_run_lets_the_waiting_slot_start() -> None:
    create_schedule(Held, key="waits", every=MINUTE, overlap="buffer_one")
    fire("waits")
    fire("waits")
    [first] = runs_of("waits")
    cancel_run(first, reason="wrong data")
    run_pending()
    fire_due_schedules(now=Schedule.objects.get(key="waits").next_fire_at - MINUTE / 2)
    first_after, second = runs_of("waits")
    assert first_after.status == RunStatus.CANCELLED
    assert second.status == RunStatus.WAITING
    assert Schedule.objects.get(key="waits").buffered_count == 0


def test_a_retried_run_is_live_again_for_the_overlap_policy() -> None:
    create_schedule(Broken, key="retried", every=MINUTE)
    fire("retried")
    run_pending(until=Schedule.objects.get(key="retried").next_fire_at - MINUTE / 2)
    [failed] = runs_of("retried")
    assert failed.status == RunStatus.FAILED
    retry_run(failed)  # it fails again only once a worker runs it: live meanwhile
    fire("retried")
    assert len(runs_of("retried")) == 1
    skipped = Event.objects.get(type="schedule.skipped")
    assert skipped.payload["live"] == [str(failed.pk)]
    assert failed.schedule_id is not None and Run.objects.get(pk=failed.pk).scheduled_for


def test_a_paused_run_is_live_and_cancel_other_cancels_it() -> None:
    create_schedule(Held, key="replaced", every=MINUTE, overlap="cancel_other")
    fire("replaced")
    [first] = runs_of("replaced")
    pause_run(first, reason="looking into it")
    fire("replaced")
    run_pending(until=Schedule.objects.get(key="replaced").next_fire_at - MINUTE / 2)
    fire_due_schedules(now=Schedule.objects.get(key="replaced").next_fire_at - MINUTE / 2)
    first_after, second = runs_of("replaced")
    assert first_after.status == RunStatus.CANCELLED
    assert "a later slot replaces this run" in str(first_after.error)
    assert second.status == RunStatus.WAITING


def test_a_run_queued_by_the_workflows_limit_is_live_for_the_policy() -> None:
    create_schedule(OneAtATime, key="limited", every=MINUTE, overlap="allow_all")
    fire("limited")
    fire("limited")
    first, second = runs_of("limited")
    assert (first.status, second.status) == (RunStatus.WAITING, RunStatus.QUEUED)
    send_signal(first, "go", {})
    run_pending()
    statuses = [Run.objects.get(pk=run.pk).status for run in (first, second)]
    assert statuses == [RunStatus.COMPLETED, RunStatus.WAITING]
