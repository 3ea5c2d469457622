"""The schedules contract called by its names as written, from the package a user
imports, with the keyword arguments the issue shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import workflows
import workflows.models
import workflows.testing
from tests.support.workflows import Work

pytestmark = pytest.mark.django_db


def test_every_name_of_the_contract() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    schedule = workflows.create_schedule(
        Work,
        key="contract",
        cron=None,
        every=timedelta(hours=1),
        tz="Europe/Berlin",
        input={},
        overlap="buffer_one",
        catchup_window=timedelta(hours=2),
        jitter=None,
        start_at=start,
        end_at=None,
        paused=False,
        note="made by the contract test",
        user=None,
    )
    assert isinstance(schedule, workflows.models.Schedule)
    assert (
        workflows.create_schedule(
            Work,
            key="contract",
            every=timedelta(hours=1),
            tz="Europe/Berlin",
            overlap="buffer_one",
            catchup_window=timedelta(hours=2),
            start_at=start,
        ).pk
        == schedule.pk
    )
    with pytest.raises(workflows.IdempotencyConflict):
        workflows.create_schedule(Work, key="contract", cron="0 2 * * *")
    with pytest.raises(workflows.InvalidInput):
        workflows.create_schedule(Work, key="bad", cron="0 2 * * *", every=timedelta(hours=1))

    fires = workflows.next_fire_times(schedule, 3, after=start)
    assert fires == [start + timedelta(hours=h) for h in (1, 2, 3)]
    assert all(fire.tzinfo is not None for fire in fires)

    workflows.update_schedule("contract", every=timedelta(hours=2))
    workflows.pause_schedule("contract", note="maintenance")
    assert workflows.get_schedule("contract").paused
    workflows.unpause_schedule("contract")
    run = workflows.trigger_schedule("contract")
    assert run.schedule == workflows.get_schedule("contract")
    assert run.scheduled_for is not None

    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    filled = workflows.backfill_schedule("contract", end - timedelta(hours=4), end)
    assert isinstance(filled, workflows.BackfillResult) and filled.slots == 2

    before = workflows.models.Run.objects.filter(schedule__key="contract").count()
    next_fire = workflows.get_schedule("contract").next_fire_at
    workflows.testing.run_pending(until=next_fire)
    assert workflows.models.Run.objects.filter(schedule__key="contract").count() == before + 1

    workflows.delete_schedule("contract")
    with pytest.raises(workflows.ScheduleNotFound):
        workflows.get_schedule("contract")


def test_a_declaration_by_its_names() -> None:
    declared = workflows.Schedule.cron("0 2 * * *", tz="Europe/Berlin", input={"full": True})
    assert declared.with_default_key("nightly").key == "nightly:0 2 * * *"
    assert workflows.Schedule.every(timedelta(minutes=5)).every == timedelta(minutes=5)
