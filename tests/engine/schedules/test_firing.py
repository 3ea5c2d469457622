"""Schedules fired by the sweeper's pass: one run per slot, the overlap policies, the
catch-up window, pause, trigger and backfill (on the database the suite runs on)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.support.workflows import Held, Waits, Work
from workflows import (
    IdempotencyConflict,
    backfill_schedule,
    create_schedule,
    pause_schedule,
    send_signal,
    trigger_schedule,
    unpause_schedule,
)
from workflows.engine.schedules.firing import fire_schedule
from workflows.models import Event, Run, Schedule
from workflows.status import RunStatus
from workflows.testing import run_pending
from workflows.workers.schedule_slots import fire_due_schedules

pytestmark = pytest.mark.django_db

MINUTE = timedelta(minutes=1)


def schedule_of(key: str) -> Schedule:
    return Schedule.objects.get(key=key)


def runs_of(key: str) -> list[Run]:
    return list(Run.objects.filter(schedule__key=key).order_by("scheduled_for"))


def at_next(key: str, slots: int = 1) -> datetime:
    """The instant the schedule's ``slots``-th next slot fires."""
    schedule = schedule_of(key)
    assert schedule.next_fire_at is not None
    return schedule.next_fire_at + (slots - 1) * (schedule.every or MINUTE)


def test_a_slot_starts_one_run_that_names_its_schedule_and_slot() -> None:
    create_schedule(Work, key="minutely", every=MINUTE)
    slot = schedule_of("minutely").next_slot_at
    result = fire_due_schedules(now=at_next("minutely"))
    assert (result.found, result.done) == (1, 1)
    [run] = runs_of("minutely")
    assert run.scheduled_for == slot
    assert run.idempotency_key == f"schedule:{run.schedule_id}:{slot.isoformat()}"
    fired = Event.objects.get(type="schedule.fired")
    assert (fired.schedule_id, fired.run_id) == (run.schedule_id, run.pk)
    # The same instant again (another sweeper, a repeat pass) decides nothing more.
    assert fire_due_schedules(now=at_next("minutely") - MINUTE).found == 0
    assert len(runs_of("minutely")) == 1
    schedule = schedule_of("minutely")
    assert schedule.fired_count == 1
    assert schedule.next_slot_at == slot + MINUTE
    assert schedule.last_run_id == run.pk


def test_a_second_sweeper_holding_an_old_read_decides_nothing() -> None:
    create_schedule(Work, key="raced", every=MINUTE)
    now = at_next("raced")
    first = fire_schedule(schedule_of("raced").pk, now)
    second = fire_schedule(schedule_of("raced").pk, now)
    assert first.claimed and len(first.started) == 1
    assert second.claimed and second.started == []
    assert len(runs_of("raced")) == 1


def test_skip_counts_the_slots_that_meet_a_live_run() -> None:
    create_schedule(Held, key="held", every=MINUTE)
    fire_due_schedules(now=at_next("held"))
    fire_due_schedules(now=at_next("held"))
    fire_due_schedules(now=at_next("held"))
    assert len(runs_of("held")) == 1
    schedule = schedule_of("held")
    assert (schedule.fired_count, schedule.skipped_count) == (1, 2)
    assert Event.objects.filter(type="schedule.skipped", schedule=schedule).count() == 2


def test_buffer_one_keeps_one_slot_and_starts_it_when_the_earlier_run_ends() -> None:
    create_schedule(Waits, key="buffered", every=MINUTE, overlap="buffer_one")
    fire_due_schedules(now=at_next("buffered"))
    fire_due_schedules(now=at_next("buffered"))
    fire_due_schedules(now=at_next("buffered"))
    schedule = schedule_of("buffered")
    assert (schedule.buffered_count, schedule.skipped_count) == (1, 1)
    [first] = runs_of("buffered")
    send_signal(first, "go", {})
    run_pending()
    assert Run.objects.get(pk=first.pk).status == RunStatus.COMPLETED
    fire_due_schedules(now=schedule.next_fire_at - MINUTE / 2)
    runs = runs_of("buffered")
    assert len(runs) == 2
    assert schedule_of("buffered").buffered_count == 0
    assert runs[1].scheduled_for == datetime.fromisoformat(schedule.buffered[0])


def test_buffer_all_starts_every_waiting_slot_in_turn() -> None:
    create_schedule(Waits, key="all", every=MINUTE, overlap="buffer_all")
    for _ in range(3):
        fire_due_schedules(now=at_next("all"))
    assert schedule_of("all").buffered_count == 2
    for expected in (2, 3):
        live = [r for r in runs_of("all") if r.status not in ("completed",)]
        send_signal(live[-1], "go", {})
        run_pending(until=schedule_of("all").next_fire_at - MINUTE / 2)
        fire_due_schedules(now=schedule_of("all").next_fire_at - MINUTE / 2)
        assert len(runs_of("all")) == expected


@pytest.mark.parametrize(
    ("overlap", "stopped"),
    [("cancel_other", RunStatus.CANCELLED), ("terminate_other", RunStatus.TERMINATED)],
)
def test_the_other_policies_stop_the_earlier_run_then_start(overlap: str, stopped: str) -> None:
    create_schedule(Held, key=overlap, every=MINUTE, overlap=overlap)
    fire_due_schedules(now=at_next(overlap))
    fire_due_schedules(now=at_next(overlap))
    run_pending(until=at_next(overlap) - MINUTE / 2)
    fire_due_schedules(now=at_next(overlap) - MINUTE / 2)
    first, second = runs_of(overlap)
    assert first.status == stopped
    assert second.status not in (RunStatus.CANCELLED, RunStatus.TERMINATED)


def test_allow_all_starts_beside_a_live_run() -> None:
    create_schedule(Held, key="beside", every=MINUTE, overlap="allow_all")
    fire_due_schedules(now=at_next("beside"))
    fire_due_schedules(now=at_next("beside"))
    assert len(runs_of("beside")) == 2


def test_after_downtime_slots_older_than_the_window_are_missed() -> None:
    create_schedule(
        Work, key="late", every=MINUTE, catchup_window=timedelta(minutes=5), overlap="allow_all"
    )
    start = schedule_of("late").next_slot_at
    fire_due_schedules(now=start + timedelta(minutes=20))
    schedule = schedule_of("late")
    assert schedule.missed_count == 15
    assert len(runs_of("late")) == 6  # minutes 15 to 20, the window's slots
    missed = Event.objects.get(type="schedule.missed")
    assert missed.payload["count"] == 15
    assert missed.payload["first"] == start.isoformat()


def test_pause_stops_the_slots_and_unpause_resumes_from_the_next() -> None:
    create_schedule(Work, key="paused", every=MINUTE)
    pause_schedule("paused", note="supplier down")
    assert fire_due_schedules(now=at_next("paused", 10)).found == 0
    schedule = unpause_schedule("paused")
    assert schedule.note == ""
    assert schedule.next_slot_at > datetime.now(UTC) - timedelta(seconds=5)
    assert runs_of("paused") == []


def test_trigger_starts_one_run_now_even_paused() -> None:
    create_schedule(Held, key="manual", every=timedelta(days=1), paused=True)
    run = trigger_schedule("manual")
    assert run.schedule_id == schedule_of("manual").pk
    assert run.idempotency_key.startswith(f"schedule:{run.schedule_id}:trigger:")
    assert schedule_of("manual").fired_count == 1


def test_backfill_starts_each_past_slot_once() -> None:
    create_schedule(Work, key="history", cron="0 * * * *")
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=5)
    dry = backfill_schedule("history", start, end, dry_run=True)
    assert (dry.slots, dry.would_start, dry.started) == (5, 5, [])
    done = backfill_schedule("history", start, end)
    assert len(done.started) == 5
    assert [r.scheduled_for for r in done.started] == [start + timedelta(hours=h) for h in range(5)]
    again = backfill_schedule("history", start - timedelta(hours=1), end)
    assert (len(again.started), again.existing) == (1, 5)


def test_the_same_spec_returns_the_schedule_and_another_conflicts() -> None:
    first = create_schedule(Work, key="same", every=MINUTE)
    assert create_schedule(Work, key="same", every=MINUTE).pk == first.pk
    with pytest.raises(IdempotencyConflict):
        create_schedule(Work, key="same", every=2 * MINUTE)


def test_run_pending_fires_each_slot_in_turn() -> None:
    create_schedule(Work, key="pending", every=MINUTE)
    until = at_next("pending", 5)
    run_pending(until=until)
    runs = runs_of("pending")
    assert len(runs) == 5
    assert all(run.status == RunStatus.COMPLETED for run in runs)


def test_a_deleted_schedules_events_still_name_it() -> None:
    from workflows import delete_schedule

    create_schedule(Work, key="gone", every=MINUTE)
    fire_due_schedules(now=at_next("gone"))
    delete_schedule("gone")
    events = list(Event.objects.filter(type__startswith="schedule.").order_by("id"))
    assert [e.type for e in events] == ["schedule.created", "schedule.fired", "schedule.deleted"]
    assert all(e.schedule_id is None for e in events)
    assert all(e.payload["key"] == "gone" and e.payload["workflow"] == Work.name for e in events)
    [run] = Run.objects.filter(idempotency_key__startswith="schedule:")
    assert run.schedule_id is None and run.scheduled_for is not None
