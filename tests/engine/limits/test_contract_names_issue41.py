"""Issue #41's contract, called by its names as written from ``workflows`` and ``ctx``
with the keyword arguments the issue shows: run variables, run metadata, budgets at run
time and breach counters, the failure-class errors, bulk recovery of stuck units, and a
consumer with a filter."""

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


VARIABLES = f"{__name__}.uses_variables"


def uses_variables(ctx):
    ctx.set_variables({"seen": dict(ctx.variables), "region": None})
    return dict(ctx.variables)


class Varied(workflows.Workflow):
    name = "contract41_varied"
    first = workflows.Task(VARIABLES)
    second = workflows.Task(VARIABLES, after=["first"])


def test_variables_and_metadata_by_their_names():
    run = workflows.start_run(Varied, {}, variables={"region": "eu"}, title="Order 7")
    assert (run.variables, run.title, run.trigger) == ({"region": "eu"}, "Order 7", "code")
    assert workflows.set_business_key(run, "ORDER-7").business_key == "ORDER-7"
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    # The first saw the start's and removed "region"; the second saw the first's commit,
    # and its patch merged into "seen" (a merge patch merges objects member by member).
    assert run.variables == {"seen": {"region": "eu", "seen": {"region": "eu"}}}
    assert workflows.dismiss_run(run).dismissed_at is not None
    assert workflows.undismiss_run(run).dismissed_at is None


def test_bulk_recovery_of_stuck_units_by_its_names():
    run = workflows.start_run(Work, {})  # its first step ready, no worker serving it
    units = {"kind": "step", "statuses": ["ready"], "workflow": Work.name}
    advice = workflows.bulk("fail_step", units=units)
    assert advice.dry_run and advice.matched == advice.eligible == 1
    done = workflows.bulk("fail_step", units=units, dry_run=False, reason="no worker")
    assert (done.units, done.done) == ("step", 1)
    run.refresh_from_db()
    assert run.status == "failed"
