"""The sweeper's pass over schedules costs a bounded number of statements: one to find
what is due, however many schedules there are, and the same fixed number for each
schedule it fires."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support.workflows import Work
from workflows import create_schedule
from workflows.definitions.schedules import ScheduleSpec
from workflows.engine.sql.clock import database_now
from workflows.models import Schedule
from workflows.workers.schedule_slots import fire_due_schedules

pytestmark = pytest.mark.django_db

MINUTE = timedelta(minutes=1)
# The schedule read and claimed, its live runs, the slot's key looked up, the run's start
# (the run, its steps, their read, the root entered, its events), the schedule written
# back and its events, and the transition's own two (a savepoint inside the test's
# transaction; BEGIN and COMMIT in a deployment).
PER_SCHEDULE = 13


def idle_schedules(count: int) -> None:
    """``count`` schedules whose next slot is a day away, written in bulk."""
    later = database_now() + timedelta(days=1)
    spec = ScheduleSpec.checked(workflow=Work.name, key="idle", every=MINUTE)
    Schedule.objects.bulk_create(
        [
            Schedule(
                key=f"idle-{n}",
                **Schedule.spec_columns(spec),
                next_slot_at=later,
                next_fire_at=later,
            )
            for n in range(count)
        ],
        batch_size=1000,
    )


def statements_of_a_pass(due: int) -> int:
    """Statements of one pass at a moment when ``due`` schedules have a slot due."""
    for n in range(due):
        create_schedule(Work, key=f"due-{n}", every=MINUTE)
    now = Schedule.objects.filter(key__startswith="due-").order_by("-next_fire_at").first()
    at = now.next_fire_at if now else database_now()
    with CaptureQueriesContext(connection) as pass_:
        result = fire_due_schedules(now=at)
    assert result.done == due
    Schedule.objects.filter(key__startswith="due-").delete()
    return len(pass_)


def test_a_pass_with_nothing_due_is_one_statement_among_ten_thousand_schedules() -> None:
    idle_schedules(10_000)
    now = database_now()
    with CaptureQueriesContext(connection) as pass_:
        assert fire_due_schedules(now=now).found == 0
    assert len(pass_) == 1


def test_each_schedule_fired_costs_the_same_statements_however_many_are_idle() -> None:
    few = statements_of_a_pass(due=2)
    idle_schedules(10_000)
    many = statements_of_a_pass(due=2)
    assert many == few
    one_more = statements_of_a_pass(due=3)
    per_schedule = one_more - many
    assert few == 1 + 2 * per_schedule
    assert per_schedule == PER_SCHEDULE
