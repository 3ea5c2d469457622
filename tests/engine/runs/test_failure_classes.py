"""Failure classes: every failed attempt says why it failed (row, error, event), and
``Retry(retry_on=...)`` retries by class."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.support.events import payloads
from tests.support.handlers import NOOP
from workflows import (
    DefinitionError,
    FanOut,
    PermanentError,
    Retry,
    RunCancelled,
    Task,
    TransientError,
    Workflow,
)
from workflows.definitions import Budget
from workflows.engine import STEP, claim_step, fail_attempt, reclaim
from workflows.engine.failures import AttemptTimedOut, classify
from workflows.models import FanOutItem, Run, Step
from workflows.status import FailureClass
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.runs.test_failure_classes"
LATER = timedelta(hours=1)


class Unsupported(Exception):
    pass


class NotYet(TransientError, Unsupported):
    """A handler's own word that it is passing, though of a type ``non_retryable`` lists."""


class Contradictory(PermanentError, TransientError):
    pass


def flaky(ctx):
    if ctx.attempt == 1:
        raise ConnectionError("try again")
    return ctx.attempt


def declined(ctx):
    raise PermanentError("card declined")


def unsupported(ctx):
    raise Unsupported("no such thing")


def not_yet_then_done(ctx):
    if ctx.attempt == 1:
        raise NotYet("the ledger is closed until nine")
    return ctx.attempt


def cancels_then_stops(ctx):
    """Cancel its own run, then stop as a heartbeat would tell it to."""
    workflows.cancel_run(ctx.run_id)
    raise RunCancelled("the run is cancelling")


def spend_ten(ctx):
    ctx.report_usage("tokens", 10)
    return ctx.step_name


THREE = Retry(max_attempts=3, initial_interval=timedelta(seconds=1))
TRANSIENT_ONLY = Retry(max_attempts=3, retry_on={"transient"})


class Flaky(Workflow):
    name = "failure_flaky"
    only = Task(f"{HERE}.flaky", retry=THREE)


class Declined(Workflow):
    name = "failure_declined"
    only = Task(f"{HERE}.declined", retry=THREE)


class NonRetryable(Workflow):
    name = "failure_non_retryable"
    only = Task(f"{HERE}.unsupported", retry=Retry(max_attempts=3, non_retryable=(Unsupported,)))


class NotYetThenDone(Workflow):
    name = "failure_not_yet"
    only = Task(
        f"{HERE}.not_yet_then_done", retry=Retry(max_attempts=3, non_retryable=(Unsupported,))
    )


class NeverRetried(Workflow):
    name = "failure_never_retried"
    only = Task(f"{HERE}.not_yet_then_done", retry=Retry(max_attempts=3, retry_on=set()))


class TimeoutRetried(Workflow):
    name = "failure_timeout_retried"
    only = Task(
        NOOP,
        timeout=timedelta(seconds=30),
        retry=Retry(max_attempts=3, retry_on={"transient", "timeout", "lease_expired"}),
    )


class Cancelled(Workflow):
    name = "failure_cancelled"
    only = Task(f"{HERE}.cancels_then_stops", retry=THREE)


class OverBudget(Workflow):
    name = "failure_over_budget"
    budgets = [Budget("tokens", 10, on_exhausted="fail")]
    first = Task(f"{HERE}.spend_ten", retry=THREE)
    second = Task(f"{HERE}.spend_ten", retry=THREE)


class TransientOnly(Workflow):
    name = "failure_transient_only"
    only = Task(NOOP, timeout=timedelta(seconds=30), retry=TRANSIENT_ONLY)


class Default(Workflow):
    name = "failure_default"
    only = Task(NOOP, timeout=timedelta(seconds=30), retry=THREE)


class FlakyItems(Workflow):
    name = "failure_flaky_items"
    spread = FanOut(f"{HERE}.flaky", items=lambda ctx: [1, 2], retry=THREE)


def only_step(run) -> Step:
    return Step.objects.get(run=run, name="only")


def failed_at_once(workflow: type[Workflow]) -> tuple[Run, Step]:
    """A run of ``workflow`` gone as far as it can go within the hour, and its step
    ``only``: failed in its first attempt, not retried."""
    run = workflows.start_run(workflow)
    run_pending(until=timezone.now() + LATER)
    step = only_step(run)
    assert (step.status, step.attempt) == ("failed", 1)
    return run, step


def assert_recorded(unit, failure_class: str) -> None:
    """The class is in the row's column and in its error."""
    assert unit.failure_class == failure_class
    assert unit.error["failure_class"] == failure_class


def test_an_exception_is_transient_and_retried():
    run = workflows.start_run(Flaky)
    run_pending()
    step = only_step(run)
    assert step.status == "retry_scheduled"
    assert_recorded(step, "transient")
    [scheduled] = payloads(run, "step.retry_scheduled")
    assert scheduled["failure_class"] == "transient"

    run_pending(until=timezone.now() + LATER)
    step.refresh_from_db()
    assert (step.status, step.output) == ("completed", 2)
    assert_recorded(step, "transient")  # the class of its last failed attempt stays


def test_a_permanent_error_is_permanent_and_not_retried():
    run, step = failed_at_once(Declined)
    assert_recorded(step, "permanent")
    assert [event["failure_class"] for event in payloads(run, "step.failed")] == ["permanent"]
    assert payloads(run, "step.retry_scheduled") == []


def test_a_non_retryable_exception_is_permanent():
    _, step = failed_at_once(NonRetryable)
    assert_recorded(step, "permanent")


def test_a_start_refused_by_a_budget_is_budget_and_not_retried():
    run = workflows.start_run(OverBudget)
    run_pending(until=timezone.now() + LATER)
    second = Step.objects.get(run=run, name="second")
    assert (second.status, second.attempt) == ("failed", 1)
    assert_recorded(second, "budget")
    assert second.error["type"] == "workflows.errors.BudgetExhausted"
    [failed] = payloads(run, "step.failed")
    assert failed["failure_class"] == "budget"


def test_run_cancelled_is_cancelled_and_not_retried():
    run, step = failed_at_once(Cancelled)
    assert_recorded(step, "cancelled")
    assert payloads(run, "step.retry_scheduled") == []
    assert [event["failure_class"] for event in payloads(run, "step.failed")] == ["cancelled"]
    assert payloads(run, "lease.lost") == []
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_items_record_their_class_too():
    run = workflows.start_run(FlakyItems)
    run_pending()
    items = list(FanOutItem.objects.filter(step__run=run))
    assert {item.status for item in items} == {"retry_scheduled"}
    for item in items:
        assert_recorded(item, "transient")
    assert {event["failure_class"] for event in payloads(run, "item.retry_scheduled")} == {
        "transient"
    }


def test_a_reclaimed_attempt_is_lease_expired_and_retried_by_default():
    run = workflows.start_run(Default)
    lease = claim_step(only_step(run).pk, "gone")
    assert reclaim(STEP, lease.step_id, now=timezone.now() + LATER) == "ready"
    step = only_step(run)
    assert_recorded(step, "lease_expired")
    assert step.error["code"] == "lease_expired"
    [expired] = payloads(run, "lease.expired")
    assert expired["failure_class"] == "lease_expired"


def test_retry_on_without_lease_expired_fails_a_reclaimed_unit_for_good():
    run = workflows.start_run(TransientOnly)
    lease = claim_step(only_step(run).pk, "gone")
    assert reclaim(STEP, lease.step_id, now=timezone.now() + LATER) == "failed"
    step = only_step(run)
    assert (step.status, step.attempt, step.max_attempts) == ("failed", 1, 3)
    assert_recorded(step, "lease_expired")
    [failed] = payloads(run, "step.failed")
    assert failed["failure_class"] == "lease_expired"
    run.refresh_from_db()
    assert run.status == "failed"


def test_a_timeout_is_not_retried_by_default_and_is_when_retry_on_names_it():
    terminal = workflows.start_run(Default)
    lease = claim_step(only_step(terminal).pk, "w")
    assert fail_attempt(lease, AttemptTimedOut("too slow")) == "failed"
    step = only_step(terminal)
    assert (step.status, step.attempt) == ("failed", 1)
    assert_recorded(step, "timeout")
    [failed] = payloads(terminal, "step.failed")
    assert failed["failure_class"] == "timeout"

    retried = workflows.start_run(TimeoutRetried)
    lease = claim_step(only_step(retried).pk, "w")
    assert fail_attempt(lease, AttemptTimedOut("too slow")) == "retry_scheduled"
    assert_recorded(only_step(retried), "timeout")


def test_a_transient_error_is_transient_and_retried_though_non_retryable_lists_its_type():
    run = workflows.start_run(NotYetThenDone)
    run_pending(until=timezone.now() + LATER)
    step = only_step(run)
    assert (step.status, step.attempt, step.output) == ("completed", 2, 2)
    [scheduled] = payloads(run, "step.retry_scheduled")
    assert scheduled["failure_class"] == "transient"


def test_a_transient_error_is_retried_only_as_the_policy_says():
    _, step = failed_at_once(NeverRetried)
    assert_recorded(step, "transient")


def test_retry_on_transient_only_still_retries_an_exception():
    run = workflows.start_run(TransientOnly)
    lease = claim_step(only_step(run).pk, "w")
    assert fail_attempt(lease, ConnectionError("later")) == "retry_scheduled"


def test_classify_by_exception_and_lease():
    run = workflows.start_run(NonRetryable)
    lease = claim_step(only_step(run).pk, "w")
    assert classify(ValueError("x"), lease) == FailureClass.TRANSIENT
    assert classify(PermanentError("x"), lease) == FailureClass.PERMANENT
    assert classify(Unsupported("x"), lease) == FailureClass.PERMANENT
    assert classify(AttemptTimedOut("x"), lease) == FailureClass.TIMEOUT
    assert classify(RunCancelled("x"), lease) == FailureClass.CANCELLED
    assert classify(ValueError("x")) == FailureClass.TRANSIENT
    assert classify(NotYet("x"), lease) == FailureClass.TRANSIENT
    assert classify(TransientError("x")) == FailureClass.TRANSIENT
    # Both at once: the safer reading, not retried.
    assert classify(Contradictory("x"), lease) == FailureClass.PERMANENT


# -- the policy ---------------------------------------------------------------------------


def test_retry_on_defaults_to_transient_and_lease_expired():
    assert Retry().retry_on == {"transient", "lease_expired"}
    assert Retry().describe()["retry_on"] == ["lease_expired", "transient"]
    assert Retry().retries("timeout") is False
    assert Retry(retry_on=[FailureClass.TIMEOUT]) == Retry(retry_on={"timeout"})
    assert hash(Retry(retry_on={"timeout"})) == hash(Retry(retry_on=("timeout",)))
    assert Retry(retry_on=set()).retries("transient") is False


@pytest.mark.parametrize(
    ("retry_on", "complaint"),
    [
        ("transient", "retry_on must be a set of failure classes"),
        ({"bogus"}, "unknown failure class 'bogus'"),
        ({"permanent"}, "cannot name 'permanent'"),
        ({"transient", "cancelled"}, "cannot name 'cancelled'"),
        ({"revoked"}, "cannot name 'revoked'"),
        ({"budget"}, "cannot name 'budget'"),
        (None, "retry_on must be a set of failure classes"),
    ],
)
def test_a_bad_retry_on_is_a_definition_error(retry_on, complaint):
    with pytest.raises(DefinitionError) as caught:
        type(
            "BadRetryOn",
            (Workflow,),
            {
                "__module__": __name__,
                "name": "failure_bad_retry_on",
                "a": Task(NOOP, retry=Retry(retry_on=retry_on)),
            },
        )
    assert "step 'a'" in str(caught.value)
    assert complaint in str(caught.value)
