"""``explain`` says the failure class of each step's last failed attempt, and in words
while that attempt is its last one."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from workflows import Retry, Task, Workflow
from workflows.engine import STEP, claim_step, fail_attempt, reclaim
from workflows.engine.failures import AttemptTimedOut
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.queries.test_explain_failures"


def recovers(ctx):
    if ctx.attempt == 1:
        raise ConnectionError("try again")
    return ctx.attempt


class Slow(Workflow):
    name = "explain_failure_slow"
    work = Task(NOOP, retry=Retry(max_attempts=2, retry_on={"transient", "lease_expired"}))


class Recovers(Workflow):
    name = "explain_failure_recovers"
    work = Task(f"{HERE}.recovers", retry=Retry(max_attempts=2))


def step_of(run) -> dict:
    [step] = workflows.explain(run).as_dict()["steps"]
    return step


def test_a_failed_steps_last_attempt_is_named_by_its_class():
    run = workflows.start_run(Slow)
    lease = claim_step(run.steps.get().pk, "w")
    assert fail_attempt(lease, AttemptTimedOut("too slow")) == "failed"  # not in retry_on
    step = step_of(run)
    assert (step["status"], step["failure_class"]) == ("failed", "timeout")
    assert step["last_failure"] == "last attempt failed: timeout"


def test_a_reclaimed_step_ready_again_says_its_attempt_expired():
    run = workflows.start_run(Slow)
    lease = claim_step(run.steps.get().pk, "w")
    assert reclaim(STEP, lease.step_id, now=timezone.now() + timedelta(hours=1)) == "ready"
    assert step_of(run)["last_failure"] == "last attempt failed: lease_expired"


def test_a_step_that_recovered_keeps_its_class_but_not_the_words():
    run = workflows.start_run(Recovers)
    run_pending()
    assert step_of(run)["last_failure"] == "last attempt failed: transient"
    run_pending(until=timezone.now() + timedelta(hours=1))
    step = step_of(run)
    assert (step["status"], step["failure_class"], step["last_failure"]) == (
        "completed",
        "transient",
        None,
    )
