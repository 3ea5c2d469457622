"""A schedule's slots: cron in its zone across both daylight-saving transitions, intervals
from their anchor, the bounds, the jitter; and every refusal of a spec, naming its field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from workflows import InvalidInput, Schedule
from workflows.definitions.schedules import ScheduleSpec, fire_time, next_fire_times, slots_between

BERLIN = ZoneInfo("Europe/Berlin")


def spec(**values: object) -> ScheduleSpec:
    return ScheduleSpec.checked(**{"workflow": "nightly", "key": "k", **values})


def local(slots: list[datetime]) -> list[str]:
    return [slot.astimezone(BERLIN).strftime("%m-%d %H:%M %Z") for slot in slots]


def test_a_cron_fires_in_its_zones_wall_clock_time() -> None:
    nightly = spec(cron="0 2 * * *", tz="Europe/Berlin")
    slots = next_fire_times(nightly, 2, datetime(2026, 1, 10, 12, tzinfo=UTC))
    assert slots == [datetime(2026, 1, 11, 1, tzinfo=UTC), datetime(2026, 1, 12, 1, tzinfo=UTC)]
    assert all(slot.tzinfo is UTC for slot in slots)


def test_a_time_skipped_by_spring_forward_fires_once_at_the_first_instant_after_the_gap() -> None:
    nightly = spec(cron="30 2 * * *", tz="Europe/Berlin")
    slots = next_fire_times(nightly, 3, datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert local(slots) == ["03-29 03:00 CEST", "03-30 02:30 CEST", "03-31 02:30 CEST"]


def test_a_time_repeated_by_fall_back_fires_once() -> None:
    nightly = spec(cron="30 2 * * *", tz="Europe/Berlin")
    slots = next_fire_times(nightly, 3, datetime(2026, 10, 24, 12, tzinfo=UTC))
    assert local(slots) == ["10-25 02:30 CEST", "10-26 02:30 CET", "10-27 02:30 CET"]
    # An hourly schedule fires in both of the repeated hours: each is its own instant.
    hourly = spec(cron="0 * * * *", tz="Europe/Berlin")
    around = next_fire_times(hourly, 4, datetime(2026, 10, 24, 23, 30, tzinfo=UTC))
    assert local(around) == [
        "10-25 02:00 CEST",
        "10-25 02:00 CET",
        "10-25 03:00 CET",
        "10-25 04:00 CET",
    ]
    assert len(set(around)) == 4


def test_names_ranges_lists_and_steps() -> None:
    weekdays = spec(cron="*/30 9-10 * JAN,FEB MON-FRI")
    slots = next_fire_times(weekdays, 5, datetime(2027, 1, 1, 0, tzinfo=UTC))  # a Friday
    assert [s.strftime("%a %H:%M") for s in slots] == [
        "Fri 09:00",
        "Fri 09:30",
        "Fri 10:00",
        "Fri 10:30",
        "Mon 09:00",
    ]


def test_an_interval_counts_from_start_at_or_the_epoch() -> None:
    anchored = spec(every=timedelta(minutes=7), start_at=datetime(2026, 1, 1, 0, 3, tzinfo=UTC))
    assert next_fire_times(anchored, 2, datetime(2026, 1, 1, 0, 10, tzinfo=UTC)) == [
        datetime(2026, 1, 1, 0, 17, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 24, tzinfo=UTC),
    ]
    before = next_fire_times(anchored, 1, datetime(2025, 1, 1, tzinfo=UTC))
    assert before == [datetime(2026, 1, 1, 0, 3, tzinfo=UTC)]
    hourly = spec(every=timedelta(hours=1))
    assert next_fire_times(hourly, 1, datetime(2026, 5, 5, 5, 5, tzinfo=UTC)) == [
        datetime(2026, 5, 5, 6, 0, tzinfo=UTC)
    ]


def test_no_slot_from_end_at_on() -> None:
    ending = spec(every=timedelta(hours=1), end_at=datetime(2026, 1, 1, 3, tzinfo=UTC))
    assert next_fire_times(ending, 5, datetime(2026, 1, 1, 0, 30, tzinfo=UTC)) == [
        datetime(2026, 1, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 1, 2, tzinfo=UTC),
    ]


def test_a_backfill_range_ignores_the_bounds_and_keeps_the_anchor() -> None:
    anchored = spec(every=timedelta(hours=1), start_at=datetime(2026, 1, 1, 0, 20, tzinfo=UTC))
    slots = list(
        slots_between(
            anchored, datetime(2025, 12, 31, 22, tzinfo=UTC), datetime(2026, 1, 1, 1, tzinfo=UTC)
        )
    )
    assert [s.strftime("%H:%M") for s in slots] == ["22:20", "23:20", "00:20"]


def test_jitter_is_below_its_bound_and_the_same_in_every_process() -> None:
    slot = datetime(2026, 1, 1, tzinfo=UTC)
    offsets = {
        fire_time(slot + timedelta(minutes=n), timedelta(seconds=30), "k")
        - slot
        - timedelta(minutes=n)
        for n in range(50)
    }
    assert all(timedelta(0) <= offset < timedelta(seconds=30) for offset in offsets)
    assert len(offsets) > 10
    assert fire_time(slot, timedelta(seconds=30), "k") == fire_time(
        slot, timedelta(seconds=30), "k"
    )
    assert fire_time(slot, None, "k") == slot


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * * *"}, "cron"),
        ({"cron": "0 2 * * * *"}, "cron"),
        ({"cron": "0 2 * * FUNDAY"}, "cron"),
        ({"cron": "0 2 * * *", "every": timedelta(hours=1)}, "cron"),
        ({}, "every"),
        ({"every": timedelta(0)}, "every"),
        ({"every": timedelta(seconds=-5)}, "every"),
        ({"every": 60}, "every"),
        ({"cron": "0 2 * * *", "tz": "Mars/Olympus"}, "tz"),
        ({"cron": "0 2 * * *", "tz": ""}, "tz"),
        ({"cron": "0 2 * * *", "overlap": "queue"}, "overlap"),
        ({"cron": "0 2 * * *", "input": {"when": datetime(2026, 1, 1)}}, "input"),
        ({"cron": "0 2 * * *", "input": ["a"]}, "input"),
        ({"cron": "0 2 * * *", "catchup_window": timedelta(seconds=-1)}, "catchup_window"),
        ({"cron": "0 2 * * *", "jitter": timedelta(seconds=-1)}, "jitter"),
        ({"cron": "0 2 * * *", "start_at": datetime(2026, 1, 1)}, "start_at"),
        (
            {
                "cron": "0 2 * * *",
                "start_at": datetime(2026, 1, 2, tzinfo=UTC),
                "end_at": datetime(2026, 1, 1, tzinfo=UTC),
            },
            "end_at",
        ),
        ({"cron": "0 2 * * *", "start_at": datetime(9999, 12, 31, tzinfo=UTC)}, "start_at"),
        ({"cron": "0 2 * * *", "end_at": datetime(1, 1, 1, tzinfo=UTC)}, "end_at"),
        ({"cron": "0 2 * * *", "key": ""}, "key"),
        ({"cron": "0 2 * * *", "key": "a/b"}, "key"),
        ({"cron": "0 2 * * *", "key": "x" * 201}, "key"),
    ],
)
def test_each_wrong_field_is_named(values: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        spec(**values)
    assert refused.value.details["field"] == field


def test_a_declaration_takes_no_workflow_and_no_unknown_option() -> None:
    with pytest.raises(InvalidInput) as refused:
        Schedule.cron("0 2 * * *", workflow="other")
    assert refused.value.details["field"] == "workflow"
    with pytest.raises(InvalidInput):
        Schedule.every(timedelta(minutes=5), overlpa="skip")
    with pytest.raises(InvalidInput):
        Schedule.cron("bad")
    declared = Schedule.cron("0 2 * * *", tz="Europe/Berlin").with_default_key("nightly")
    assert declared.key == "nightly:0 2 * * *"
    assert Schedule.every(timedelta(minutes=5)).with_default_key("n").key == "n:every 300s"
