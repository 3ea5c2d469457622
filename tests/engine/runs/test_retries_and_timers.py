"""Retries with backoff through Timer rows, non-retryable errors, and durable sleeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from tests.support.runs import run_inline
from workflows import PermanentError, Retry, Sleep, Task, Workflow
from workflows.engine import fire_timer
from workflows.models import Timer
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.runs.test_retries_and_timers"
ATTEMPTS: list[tuple[int, str]] = []


class Unsupported(Exception):
    pass


def always_fails(ctx):
    ATTEMPTS.append((ctx.attempt, ctx.idempotency_key))
    raise ConnectionError(f"attempt {ctx.attempt} failed")


def fails_twice(ctx):
    ATTEMPTS.append((ctx.attempt, ctx.idempotency_key))
    if ctx.attempt < 3:
        raise ConnectionError("not yet")
    return {"attempt": ctx.attempt}


def permanent(ctx):
    ATTEMPTS.append((ctx.attempt, ctx.idempotency_key))
    raise PermanentError("card declined")


def unsupported(ctx):
    ATTEMPTS.append((ctx.attempt, ctx.idempotency_key))
    raise Unsupported("no such thing")


@pytest.fixture(autouse=True)
def _reset():
    ATTEMPTS.clear()


BACKOFF = Retry(
    max_attempts=4,
    initial_interval=timedelta(seconds=10),
    backoff=2.0,
    max_interval=timedelta(seconds=25),
    non_retryable=(Unsupported,),
)


class AlwaysFails(Workflow):
    name = "retry_always_fails"
    only = Task(f"{HERE}.always_fails", retry=BACKOFF)


class FailsTwice(Workflow):
    name = "retry_fails_twice"
    only = Task(f"{HERE}.fails_twice", retry=BACKOFF)


class Permanent(Workflow):
    name = "retry_permanent"
    only = Task(f"{HERE}.permanent", retry=BACKOFF)


class NonRetryable(Workflow):
    name = "retry_non_retryable"
    only = Task(f"{HERE}.unsupported", retry=BACKOFF)


class Napping(Workflow):
    name = "timer_napping"
    before = Task(NOOP)
    nap = Sleep(timedelta(hours=2))
    after = Task(NOOP)


WAKE_AT = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)


class NappingUntil(Workflow):
    name = "timer_napping_until"
    nap = Sleep(until=lambda ctx: datetime.fromisoformat(ctx.input["wake_at"]))


def test_retry_waits_for_its_backoff_timer():
    run = workflows.start_run(AlwaysFails)
    run_pending()  # first attempt fails; its retry is due in 10 s
    step = run.steps.get()
    assert step.status == "retry_scheduled"
    assert step.attempt == 1
    assert step.error["message"] == "attempt 1 failed"
    run.refresh_from_db()
    assert run.status == "waiting"
    timer = Timer.objects.get(step=step, kind="retry", status="scheduled")
    delay = (timer.due_at - step.updated_at).total_seconds()
    assert 9 < delay <= 10.5
    assert run_pending().steps == 0  # not due yet: nothing runs
    assert len(ATTEMPTS) == 1


def test_step_failing_every_attempt_fails_after_max_attempts_no_more():
    run = workflows.start_run(AlwaysFails)
    run_pending(until=timezone.now() + timedelta(hours=1))
    step = run.steps.get()
    run.refresh_from_db()
    assert [attempt for attempt, _ in ATTEMPTS] == [1, 2, 3, 4]
    assert step.status == "failed"
    assert step.attempt == 4
    assert run.status == "failed"
    assert run.error["step"] == "only"
    assert run.error["attempt"] == 4
    retry_timers = Timer.objects.filter(step=step, kind="retry").order_by("due_at")
    assert retry_timers.count() == 3
    gaps = [(timer.due_at - timer.created_at).total_seconds() for timer in retry_timers]
    assert [round(gap) for gap in gaps] == [10, 20, 25]  # backoff, capped at max_interval
    run_pending(until=timezone.now() + timedelta(days=30))
    assert len(ATTEMPTS) == 4


def test_idempotency_key_is_stable_across_retries():
    run = run_inline(FailsTwice, until=timezone.now() + timedelta(hours=1))
    assert run.status == "completed"
    assert run.output == {"only": {"attempt": 3}}
    assert {key for _, key in ATTEMPTS} == {f"{run.pk}/only"}


def test_permanent_error_is_not_retried():
    run = run_inline(Permanent, until=timezone.now() + timedelta(hours=1))
    assert len(ATTEMPTS) == 1
    assert run.status == "failed"
    assert run.error["type"] == "workflows.errors.PermanentError"
    assert not Timer.objects.filter(run=run).exists()


def test_non_retryable_exception_is_not_retried():
    run = run_inline(NonRetryable, until=timezone.now() + timedelta(hours=1))
    assert len(ATTEMPTS) == 1
    assert run.status == "failed"
    assert run.error["message"] == "no such thing"


def test_sleep_parks_the_step_behind_a_timer_until_due():
    run = run_inline(Napping)
    assert run.status == "waiting"
    nap = run.steps.get(name="nap")
    assert nap.status == "waiting"
    timer = Timer.objects.get(step=nap)
    assert timer.kind == "sleep"
    assert timedelta(hours=2) - (timer.due_at - nap.started_at) < timedelta(seconds=1)
    run_pending(until=timezone.now() + timedelta(hours=1))
    assert run.steps.get(name="nap").status == "waiting"
    run_pending(until=timezone.now() + timedelta(hours=3))
    run.refresh_from_db()
    assert run.status == "completed"
    timer.refresh_from_db()
    assert timer.status == "fired"
    assert timer.fired_at is not None


def test_sleep_until_a_moment_from_the_input():
    run = workflows.start_run(NappingUntil, {"wake_at": WAKE_AT.isoformat()})
    assert Timer.objects.get(run=run).due_at == WAKE_AT
    run_pending(until=WAKE_AT - timedelta(seconds=1))
    assert run.steps.get().status == "waiting"
    run_pending(until=WAKE_AT)
    assert run.steps.get().status == "completed"


def test_sleep_until_returning_garbage_fails_the_run_cleanly():
    run = workflows.start_run(NappingUntil, {"wake_at": "2031-01-02T03:04:05"})  # naive
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error["code"] == "step_failed"
    assert run.error["cause"] == "sleep_error"
    assert "aware datetime" in run.error["message"]


def test_a_timer_fires_exactly_once():
    run = workflows.start_run(Napping)
    run_pending()
    timer = Timer.objects.get(run=run)
    assert fire_timer(timer.pk) is True
    assert fire_timer(timer.pk) is False
    assert run.events.filter(type="timer.fired").count() == 1
    assert run.steps.get(name="after").status == "ready"
