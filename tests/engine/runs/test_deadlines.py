"""Run deadlines: set at the start (or by the workflow), fired by a durable timer on the
database clock, failing a run that has not ended with ``deadline_exceeded``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import UNDO, UNDONE, WORK
from tests.support.runs import claimed
from tests.support.workflows import Work
from workflows import (
    DefinitionError,
    Gate,
    InvalidInput,
    LeaseLost,
    Sleep,
    SubWorkflow,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.engine import complete_work, fire_timer
from workflows.engine.sql.clock import database_now
from workflows.models import Run, Step, Timer
from workflows.testing import run_pending
from workflows.workers.scanners import fire_due_timers

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
HERE = "tests.engine.runs.test_deadlines"


def heartbeats(ctx: Any) -> str:
    """Heartbeat once, as a long handler does between pieces of its work."""
    ctx.heartbeat()
    return "went on"


class Booking(Workflow):
    """Two compensable steps, then a gate that nobody decides."""

    name = "deadline_booking"
    reserve = Task(WORK, compensate=UNDO)
    charge = Task(WORK, compensate=UNDO)
    confirm = Gate(prompt="confirm?")
    ship = Task(WORK)


class Daily(Workflow):
    name = "deadline_daily"
    deadline = timedelta(days=1)
    first = Task(WORK)
    wait = WaitForSignal("go")


class Waiting(Workflow):
    name = "deadline_waiting"
    wait = WaitForSignal("go")
    after = Task(WORK)


class Limited(Workflow):
    name = "deadline_limited"
    max_concurrent_runs = 1
    wait = WaitForSignal("go")


class Hourly(Workflow):
    name = "deadline_hourly"
    deadline = HOUR
    wait = WaitForSignal("go")


class ChildFlow(Workflow):
    name = "deadline_child"
    deadline = timedelta(hours=5)
    wait = WaitForSignal("go")


class ParentFlow(Workflow):
    name = "deadline_parent"
    book = Task(WORK, compensate=UNDO)
    child = SubWorkflow("deadline_child")


class Heartbeating(Workflow):
    name = "deadline_heartbeating"
    reserve = Task(WORK, compensate=UNDO)
    long = Task(f"{HERE}.heartbeats")


class Pulse(Workflow):
    name = "deadline_pulse"
    long = Task(f"{HERE}.heartbeats")


class Dozing(Workflow):
    name = "deadline_dozing"
    doze = Sleep(timedelta(days=7))


def refreshed(run: Run) -> Run:
    run.refresh_from_db()
    return run


def later(delta: timedelta = 2 * HOUR) -> datetime:
    return timezone.now() + delta


def deadline_timer(run: Run) -> Timer:
    return Timer.objects.get(run=run, kind="deadline")


# Setting a deadline


def test_a_duration_counts_from_the_start_on_the_database_clock():
    before = database_now()
    run = workflows.start_run(Booking, deadline=HOUR)
    after = database_now()
    assert before + HOUR <= run.deadline <= after + HOUR
    assert refreshed(run).deadline == run.deadline
    timer = deadline_timer(run)
    assert (timer.status, timer.due_at, timer.step_id) == ("scheduled", run.deadline, None)
    started = run.events.get(type="run.started")
    assert started.payload["deadline"] == run.deadline.isoformat()


def test_a_moment_is_kept_as_given():
    moment = (database_now() + timedelta(days=3)).replace(microsecond=0)
    run = workflows.start_run(Booking, deadline=moment)
    assert refreshed(run).deadline == moment
    assert deadline_timer(run).due_at == moment


def test_the_workflow_s_deadline_applies_and_the_start_s_wins():
    before = database_now()
    daily = workflows.start_run(Daily)
    assert daily.deadline >= before + timedelta(days=1)
    assert daily.deadline <= database_now() + timedelta(days=1)
    hurried = workflows.start_run(Daily, deadline=timedelta(minutes=5))
    assert hurried.deadline <= database_now() + timedelta(minutes=5)
    assert deadline_timer(hurried).due_at == hurried.deadline


def test_a_run_without_a_deadline_has_no_timer():
    run = workflows.start_run(Work)
    assert run.deadline is None
    assert not Timer.objects.filter(run=run).exists()


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (timedelta(0), "positive duration"),
        (timedelta(seconds=-5), "positive duration"),
        (timedelta(days=365 * 200), "at most"),
        (datetime(2030, 1, 1), "has no timezone"),
        (datetime(2001, 1, 1, tzinfo=UTC), "is not in the future"),
        ("tomorrow", "must be a timedelta or a timezone-aware datetime"),
        (3600, "must be a timedelta or a timezone-aware datetime"),
    ],
)
def test_a_bad_deadline_is_refused_and_nothing_is_written(value: Any, words: str):
    with pytest.raises(InvalidInput, match=words) as refused:
        workflows.start_run(Booking, deadline=value)
    assert refused.value.details["field"] == "deadline"
    assert not Run.objects.exists()
    assert not Timer.objects.exists()


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (timedelta(0), "must be a positive duration"),
        (datetime(2030, 1, 1, tzinfo=UTC), "must be a timedelta, got datetime"),
        (60, "must be a timedelta, got int"),
    ],
)
def test_a_workflow_with_a_bad_deadline_is_refused_naming_it(value: Any, words: str):
    with pytest.raises(DefinitionError, match=rf"workflow 'deadline_bad' v1: deadline {words}"):
        type(
            "Bad",
            (Workflow,),
            {"__module__": __name__, "name": "deadline_bad", "deadline": value, "s": Task(WORK)},
            register=False,
        )


# At the deadline


def test_at_its_deadline_a_run_fails_and_compensates_in_reverse_order():
    run = workflows.start_run(Booking, deadline=HOUR)
    run_pending()
    assert refreshed(run).status == "waiting"  # at the gate

    run_pending(until=later())
    run = refreshed(run)
    assert run.status == "compensated"
    assert run.error["code"] == "deadline_exceeded"
    assert run.deadline.isoformat(sep=" ", timespec="seconds") in run.error["message"]
    assert UNDONE == ["charge", "reserve"]
    steps = dict(Step.objects.filter(run=run).values_list("name", "status"))
    assert steps == {
        "reserve": "completed",
        "charge": "completed",
        "confirm": "cancelled",
        "ship": "cancelled",
    }
    assert deadline_timer(run).status == "fired"
    assert not Timer.objects.filter(run=run, status="scheduled").exists()
    exceeded = run.events.get(type="run.deadline_exceeded")
    assert exceeded.payload == {"deadline": run.deadline.isoformat(), "status": "waiting"}


def test_a_running_attempt_loses_its_lease_at_the_deadline():
    run = workflows.start_run(Booking, deadline=HOUR)
    reserve = claimed(run, "reserve", "worker")
    complete_work(reserve, "reserved")
    charge = claimed(run, "charge", "worker")

    assert fire_due_timers(now=later()).done == 1
    with pytest.raises(LeaseLost):
        complete_work(charge, "charged too late")
    step = Step.objects.get(run=run, name="charge")
    assert (step.status, step.failure_class, step.lease_owner) == ("cancelled", "cancelled", "")
    assert step.error["code"] == "deadline_exceeded"
    assert step.error["failure_class"] == "cancelled"
    cancelled = run.events.get(type="step.cancelled", step=step)
    assert cancelled.payload["failure_class"] == "cancelled"
    assert cancelled.payload["reason"] == "deadline exceeded"
    assert run.events.filter(type="lease.lost").count() == 1
    run_pending()
    assert UNDONE == ["reserve"]  # charge never completed: nothing of it to undo
    assert refreshed(run).status == "compensated"


def test_a_handler_stopped_by_the_deadline_before_its_timer_fails_the_run_by_it():
    """``ctx.heartbeat()`` raises ``RunCancelled`` once the deadline has come by the
    database clock, maybe before the sweeper fires the timer: the run fails by its
    deadline all the same, with the step's failure as the cause."""
    run = workflows.start_run(Heartbeating, deadline=HOUR)
    reserve = claimed(run, "reserve", "worker")
    complete_work(reserve, "reserved")
    Run.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    run_pending()
    run = refreshed(run)
    assert (run.status, run.error["code"]) == ("compensated", "deadline_exceeded")
    assert run.error["cause"]["failure_class"] == "cancelled"
    long = Step.objects.get(run=run, name="long")
    assert (long.status, long.failure_class) == ("failed", "cancelled")
    assert UNDONE == ["reserve"]
    assert deadline_timer(run).status == "cancelled"


def test_a_run_waiting_on_a_signal_fails_at_its_deadline_without_compensation():
    run = workflows.start_run(Waiting, deadline=timedelta(minutes=30))
    run_pending(until=later(timedelta(minutes=29)))
    assert refreshed(run).status == "waiting"
    run_pending(until=later(timedelta(minutes=31)))
    run = refreshed(run)
    assert (run.status, run.error["code"]) == ("failed", "deadline_exceeded")
    assert Step.objects.get(run=run, name="wait").status == "cancelled"


def test_a_sleeping_run_fails_at_its_deadline_and_its_sleep_is_cancelled():
    run = workflows.start_run(Dozing, deadline=timedelta(days=1))
    run_pending(until=later(timedelta(days=2)))
    assert refreshed(run).status == "failed"
    assert Timer.objects.get(run=run, kind="sleep").status == "cancelled"


def test_a_paused_run_past_its_deadline_fails_too():
    run = workflows.start_run(Booking, deadline=HOUR)
    run_pending()
    workflows.pause_run(run, reason="audit")
    run_pending(until=later())
    run = refreshed(run)
    assert (run.status, run.error["code"], run.paused_reason) == (
        "compensated",
        "deadline_exceeded",
        "",
    )
    assert UNDONE == ["charge", "reserve"]


def test_a_queued_run_past_its_deadline_fails_and_never_starts():
    first = workflows.start_run(Limited)
    queued = workflows.start_run(Limited, deadline=HOUR)
    assert refreshed(queued).status == "queued"
    run_pending(until=later())
    queued = refreshed(queued)
    assert (queued.status, queued.error["code"], queued.started_at) == (
        "failed",
        "deadline_exceeded",
        None,
    )
    assert refreshed(first).status == "waiting"
    workflows.send_signal(first, "go")
    run_pending()
    assert refreshed(first).status == "completed"
    assert refreshed(queued).status == "failed"  # its place went to no one


def test_a_blocked_flow_member_past_its_deadline_fails_and_never_starts():
    flow = workflows.create_flow("deadline_flow")
    upstream = workflows.add_to_flow(flow, Waiting, member="first")
    blocked = workflows.add_to_flow(flow, Hourly, member="second", after=["first"])
    assert refreshed(blocked).status == "blocked"
    assert blocked.deadline is not None  # the workflow's, from the member's creation
    run_pending(until=later(timedelta(minutes=90)))
    blocked = refreshed(blocked)
    assert (blocked.status, blocked.error["code"], blocked.started_at) == (
        "failed",
        "deadline_exceeded",
        None,
    )
    assert refreshed(upstream).status == "waiting"  # no deadline of its own


def test_a_parent_past_its_deadline_cancels_its_child_and_then_compensates():
    parent = workflows.start_run(ParentFlow, deadline=HOUR)
    run_pending()
    child = Run.objects.get(parent_run=parent)
    assert child.deadline is not None  # the child's own workflow's, not its parent's
    assert child.deadline > parent.deadline
    run_pending(until=later())
    assert refreshed(child).status == "cancelled"
    parent = refreshed(parent)
    assert (parent.status, parent.error["code"]) == ("compensated", "deadline_exceeded")
    assert UNDONE == ["book"]


def test_a_paused_child_of_a_parent_past_its_deadline_is_cancelled_too():
    # The orphaned-children scanner takes every child a cancel accepts: a paused child
    # left alone would hold its parent in compensating until someone resumed it.
    parent = workflows.start_run(ParentFlow, deadline=HOUR)
    run_pending()
    child = Run.objects.get(parent_run=parent)
    workflows.pause_run(child, reason="inspecting")
    run_pending(until=later())
    assert refreshed(child).status == "cancelled"
    parent = refreshed(parent)
    assert (parent.status, parent.error["code"]) == ("compensated", "deadline_exceeded")


def test_a_child_s_own_deadline_fails_the_child_and_so_its_parent_step():
    parent = workflows.start_run(ParentFlow)
    run_pending(until=later(timedelta(hours=6)))
    child = Run.objects.get(parent_run=parent)
    assert (refreshed(child).status, child.error["code"]) == ("failed", "deadline_exceeded")
    parent = refreshed(parent)
    assert parent.status == "compensated"
    assert (parent.error["code"], parent.error["cause"]) == ("step_failed", "child_failed")


def test_a_completed_run_takes_its_deadline_timer_with_it():
    run = workflows.start_run(Work, deadline=HOUR)
    run_pending()
    assert refreshed(run).status == "completed"
    assert deadline_timer(run).status == "cancelled"
    assert fire_due_timers(now=later()).found == 0
    assert refreshed(run).status == "completed"


def test_a_deadline_timer_firing_on_an_ended_or_unwinding_run_changes_nothing():
    done = workflows.start_run(Work)
    run_pending()
    cancelling = workflows.start_run(Booking, deadline=HOUR)
    run_pending()
    workflows.cancel_run(cancelling)
    assert refreshed(cancelling).status in {"cancelling", "cancelled"}
    for run in (done, cancelling):
        # A timer left scheduled by some path: it fires, and nothing else happens.
        timer = Timer.objects.create(run=run, kind="deadline", due_at=timezone.now())
        before = refreshed(run)
        assert fire_timer(timer.pk) is True
        after = refreshed(run)
        assert (after.status, after.version) == (before.status, before.version)
        assert not after.events.filter(type="run.deadline_exceeded").exists()


def test_cancelling_a_run_cancels_its_deadline_timer():
    run = workflows.start_run(Booking, deadline=HOUR)
    run_pending()
    workflows.cancel_run(run)
    assert deadline_timer(run).status == "cancelled"
    run_pending(until=later())
    run = refreshed(run)
    assert (run.status, run.error["code"]) == ("cancelled", "cancelled")


# Reading it


def test_explain_shows_the_deadline_and_the_time_left():
    run = workflows.start_run(Booking, deadline=HOUR)
    now = timezone.now()
    explained = workflows.explain(run, now=now)
    assert explained.deadline == refreshed(run).deadline
    assert explained.time_left == run.deadline - now
    assert not explained.deadline_passed
    # The deadline holds nothing: it is told by deadline and time_left, not waiting_on.
    assert [entry.kind for entry in explained.waiting_on] == ["dispatch"]
    as_dict = explained.as_dict()
    assert as_dict["deadline"] == run.deadline.isoformat()
    assert as_dict["time_left"] == pytest.approx((run.deadline - now).total_seconds())
    passed = workflows.explain(run, now=run.deadline + timedelta(minutes=1))
    assert passed.deadline_passed and passed.time_left == timedelta(minutes=-1)
    plain = workflows.explain(workflows.start_run(Work))
    assert (plain.deadline, plain.time_left, plain.as_dict()["deadline_passed"]) == (
        None,
        None,
        False,
    )


# Replaying a run that failed by its deadline


def test_a_retry_keeps_no_deadline_unless_given_a_new_one():
    run = workflows.start_run(Waiting, deadline=HOUR)
    run_pending(until=later())
    assert refreshed(run).error["code"] == "deadline_exceeded"

    workflows.retry_run(run)
    run = refreshed(run)
    assert (run.status, run.deadline, run.error) == ("waiting", None, None)
    assert not Timer.objects.filter(run=run, kind="deadline", status="scheduled").exists()

    workflows.cancel_run(run)
    run_pending()
    before = database_now()
    workflows.retry_run(run, deadline=timedelta(hours=3))
    run = refreshed(run)
    assert run.deadline >= before + timedelta(hours=3)
    assert Timer.objects.get(run=run, kind="deadline", status="scheduled").due_at == run.deadline
    run_pending(until=later(timedelta(hours=4)))
    assert refreshed(run).error["code"] == "deadline_exceeded"


def test_any_revival_of_a_run_its_deadline_failed_clears_the_deadline():
    """retry_step (and skip_step) bring a failed run back too: without a deadline, or its
    handlers would be stopped at their first heartbeat for a deadline long gone."""
    run = workflows.start_run(Pulse, deadline=HOUR)
    Run.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    run_pending()
    run = refreshed(run)
    assert (run.status, run.error["code"]) == ("failed", "deadline_exceeded")
    workflows.retry_step(Step.objects.get(run=run, name="long"))
    assert refreshed(run).deadline is None
    run_pending()
    assert refreshed(run).status == "completed"
