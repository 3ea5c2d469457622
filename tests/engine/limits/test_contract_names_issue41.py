"""Issue #41's contract so far, called by its names as written from ``workflows`` with
the keyword arguments the issue shows: budgets at run time and breach counters, the
failure-class errors, and a consumer with a filter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.support.workflows import Work
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def test_budgets_at_run_time_by_their_names():
    workflows.create_budget(
        Work.name,
        "tokens",
        limit=100,
        per="workflow",
        period=timedelta(days=1),
        on_exhausted="hold",
        user=None,
    )
    workflows.report_usage(Work.name, "tokens", 60, scope_key="", user=None)
    workflows.report_usage(Work.name, "tokens", 60, scope_key="", user=None)
    (counter,) = [c for c in workflows.budget_counters() if c.dimension == "tokens"]
    assert counter.breaches == 1
    assert counter.last_breached_at is not None


FLAKY = f"{__name__}.flaky"


def flaky(ctx):
    if ctx.attempt == 1:
        raise workflows.TransientError("the bank is busy")
    raise workflows.PermanentError("the card is refused")


class Paying(workflows.Workflow):
    name = "contract41_paying"
    pay = workflows.Task(FLAKY, retry=workflows.Retry(max_attempts=5))


def test_failure_classes_and_a_filtered_consumer_by_their_names():
    run = workflows.start_run(Paying, {})
    run_pending(until=timezone.now() + timedelta(hours=1))
    step = run.steps.get(name="pay")
    # Transient: retried; permanent: the step fails at once with attempts to spare.
    assert (step.status, step.attempt) == ("failed", 2)
    consumer = workflows.create_consumer("outcomes", workflows=[Work.name], kinds=["run.completed"])
    assert (list(consumer.workflows), list(consumer.kinds)) == ([Work.name], ["run.completed"])
