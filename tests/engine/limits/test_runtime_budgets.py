"""Budgets set at run time (``create_budget``), usage an operator reports
(``report_usage``) and the breach counters: a run-time budget holds and fails work as a
declared one does, wins over a declared one of the same name, and every bad argument is
refused by name before anything is written."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.admin.models import LogEntry
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError
from django.urls import reverse

import workflows
from tests.support.commands import run_command
from tests.support.handlers import NOOP
from tests.support.users import staff
from workflows import Budget, Task, Workflow
from workflows.engine import claim_step
from workflows.errors import InvalidInput, WorkHeld
from workflows.models import BudgetCounter, Run, RuntimeBudget, Step, UsageReport
from workflows.testing import run_pending
from workflows.workers.runner import run_attempt

pytestmark = pytest.mark.django_db

HERE = "tests.engine.limits.test_runtime_budgets"


def spend_ten(ctx):
    ctx.report_usage("tokens", 10)
    return ctx.step_name


class Unbudgeted(Workflow):
    """Declares no budget: every budget of it is set at run time."""

    name = "runtime_budget_unbudgeted"
    first = Task(f"{HERE}.spend_ten")
    second = Task(f"{HERE}.spend_ten")


class Declared(Workflow):
    name = "runtime_budget_declared"
    budgets = [Budget("tokens", 100), Budget("calls", 5, per="business_key")]
    first = Task(f"{HERE}.spend_ten")
    second = Task(f"{HERE}.spend_ten")


class Quiet(Workflow):
    name = "runtime_budget_quiet"
    call = Task(NOOP)


def status(run: Run) -> str:
    return Run.objects.get(pk=run.pk).status


def counter(workflow: str, dimension: str = "tokens", key: str = "") -> BudgetCounter:
    return BudgetCounter.objects.get(workflow_name=workflow, dimension=dimension, scope_key=key)


# -- holding and failing as a declared budget does -------------------------------------


def test_a_run_time_budget_holds_the_next_step_until_it_is_raised():
    made = workflows.create_budget(Unbudgeted, "tokens", limit=10)
    assert (made.created, made.version, made.counters, made.released) == (True, 1, 0, 0)
    run = workflows.start_run(Unbudgeted)
    run_pending()
    second = Step.objects.get(run=run, name="second")
    assert (second.status, second.held_on) == ("ready", "budget:tokens")
    assert status(run) == "running"

    assert workflows.raise_budget(Unbudgeted.name, "tokens", limit=100).released == 1
    run_pending()
    assert status(run) == "completed"
    assert counter(Unbudgeted.name).used == 20


def test_a_worker_chaining_into_the_next_step_is_held_by_a_run_time_budget():
    workflows.create_budget(Unbudgeted.name, "tokens", limit=10)
    run = workflows.start_run(Unbudgeted)
    first = Step.objects.get(run=run, name="first")
    # The worker finishing the first step would take the second in the same
    # transaction: the budget, used up by the first, stops it.
    assert run_attempt(claim_step(first.pk, "worker-a"), chain=True) is None
    second = Step.objects.get(run=run, name="second")
    assert (second.status, second.held_on, second.attempt) == ("ready", "", 0)
    with pytest.raises(WorkHeld):  # the claim records the hold
        claim_step(second.pk, "worker-a")
    assert Step.objects.get(pk=second.pk).held_on == "budget:tokens"


def test_a_run_time_fail_budget_fails_the_next_step_with_budget_exhausted():
    workflows.create_budget(Unbudgeted, "tokens", limit=10, on_exhausted="fail")
    run = workflows.start_run(Unbudgeted)
    run_pending()
    assert status(run) == "failed"
    second = Step.objects.get(run=run, name="second")
    assert second.status == "failed" and second.error["type"] == "workflows.errors.BudgetExhausted"


def test_a_run_time_budget_replaces_the_declared_one_of_the_same_name():
    run = workflows.start_run(Declared)
    run_pending()
    assert status(run) == "completed"  # 20 of the declared 100
    assert counter(Declared.name).limit == 100

    made = workflows.create_budget(Declared, "tokens", limit=30, on_exhausted="fail")
    assert (made.created, made.counters) == (True, 1)  # the existing counter took it
    assert counter(Declared.name).limit == 30
    (view,) = [
        workflows.services.budgets.budget_view(c)
        for c in workflows.budget_counters(workflow=Declared.name)
    ]
    assert (view.origin, view.on_exhausted, view.limit) == ("run time", "fail", 30)

    again = workflows.start_run(Declared)
    run_pending()
    assert status(again) == "failed"  # 30 reached by the first step: the second fails


def test_changing_a_run_time_budget_bumps_its_version_and_releases_what_it_held():
    workflows.create_budget(Unbudgeted, "tokens", limit=10)
    run = workflows.start_run(Unbudgeted)
    run_pending()
    changed = workflows.create_budget(Unbudgeted, "tokens", limit=50, period=timedelta(hours=1))
    assert (changed.created, changed.version, changed.counters, changed.released) == (
        False,
        2,
        1,
        1,
    )
    rule = RuntimeBudget.objects.get()
    assert (rule.limit, rule.period, rule.on_exhausted) == (50, timedelta(hours=1), "hold")
    run_pending()
    assert status(run) == "completed"


def test_a_business_key_budget_set_at_run_time_counts_each_key_apart():
    workflows.create_budget(Unbudgeted, "tokens", limit=10, per="business_key")
    acme = workflows.start_run(Unbudgeted, business_key="acme")
    keyless = workflows.start_run(Unbudgeted)
    run_pending()
    assert status(acme) == "running"  # held after its first step
    assert status(keyless) == "completed"  # not covered: no business key
    assert counter(Unbudgeted.name, key="acme").used == 10


# -- usage reported by an operator ------------------------------------------------------


def test_an_operator_report_counts_like_a_steps_and_is_kept_with_who():
    operator = staff("operator", "view_run", "operate_run")
    views = workflows.report_usage(Declared, "calls", 2, scope_key="acme", user=operator)
    assert [(v.per, v.scope_key, v.used) for v in views] == [("business_key", "acme", 2)]
    views = workflows.report_usage(Declared.name, "tokens", "7.5", scope_key="acme")
    assert [(v.per, v.used) for v in views] == [("workflow", Decimal("7.5"))]
    reports = UsageReport.objects.order_by("id")
    assert [
        (r.run_id, r.workflow_name, r.scope_key, r.dimension, r.amount, r.reported_by)
        for r in reports
    ] == [
        (None, Declared.name, "acme", "calls", 2, "operator"),
        (None, Declared.name, "acme", "tokens", Decimal("7.5"), ""),
    ]


def test_an_operator_report_that_uses_a_budget_up_holds_the_runs_it_covers():
    run = workflows.start_run(Declared, business_key="acme")
    workflows.report_usage(Declared, "calls", 5, scope_key="acme")
    run_pending()
    first = Step.objects.get(run=run, name="first")
    assert (first.status, first.held_on) == ("ready", "budget:calls")


def test_a_breach_is_counted_once_when_usage_crosses_the_limit_from_below():
    workflows.create_budget(Quiet, "tokens", limit=10)
    workflows.report_usage(Quiet, "tokens", 6)
    assert (counter(Quiet.name).breaches, counter(Quiet.name).last_breached_at) == (0, None)
    workflows.report_usage(Quiet, "tokens", 4)  # to the limit: a breach
    first = counter(Quiet.name)
    assert first.breaches == 1 and first.last_breached_at is not None
    workflows.report_usage(Quiet, "tokens", 3)  # already past it: not another
    assert counter(Quiet.name).breaches == 1
    assert counter(Quiet.name).last_breached_at == first.last_breached_at

    workflows.reset_budget(Quiet.name, "tokens")
    workflows.report_usage(Quiet, "tokens", 0)  # nothing used: no crossing
    workflows.report_usage(Quiet, "tokens", 25)  # well past it at once: one breach
    again = counter(Quiet.name)
    assert again.breaches == 2 and again.last_breached_at >= first.last_breached_at
    (view,) = [workflows.services.budgets.budget_view(c) for c in workflows.budget_counters()]
    assert (view.breaches, view.as_dict()["breaches"]) == (2, 2)


def test_a_step_report_crossing_the_limit_counts_a_breach():
    workflows.create_budget(Unbudgeted, "tokens", limit=10)
    workflows.start_run(Unbudgeted)
    run_pending()
    assert counter(Unbudgeted.name).breaches == 1


# -- refusals: each names its argument, nothing is written -----------------------------


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"workflow": "no_such_workflow"}, "workflow"),
        ({"workflow": 3}, "workflow"),
        ({"dimension": "two words"}, "dimension"),
        ({"dimension": ""}, "dimension"),
        ({"dimension": None}, "dimension"),
        ({"limit": -1}, "limit"),
        ({"limit": "lots"}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": float("nan")}, "limit"),
        ({"limit": 10**18}, "limit"),
        ({"per": "customer"}, "per"),
        ({"period": timedelta(0)}, "period"),
        ({"period": 3600}, "period"),
        ({"on_exhausted": "queue"}, "on_exhausted"),
    ],
)
def test_create_budget_refuses_each_bad_argument_by_name(arguments, field):
    given = {"workflow": Quiet.name, "dimension": "tokens", "limit": 5, **arguments}
    with pytest.raises(InvalidInput) as refused:
        workflows.create_budget(given.pop("workflow"), given.pop("dimension"), **given)
    assert refused.value.details["field"] == field
    assert field.replace("_", " ") in refused.value.message.replace("_", " ")
    assert not RuntimeBudget.objects.exists()
    assert not BudgetCounter.objects.exists()


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"workflow": "no_such_workflow"}, "workflow"),
        ({"dimension": "dollars"}, "dimension"),  # no budget counts it
        ({"dimension": 5}, "dimension"),
        ({"amount": -2}, "amount"),
        ({"amount": "two"}, "amount"),
        ({"amount": None}, "amount"),
        ({"scope_key": "bad\x00key"}, "scope_key"),
        ({"scope_key": "k" * 256}, "scope_key"),
    ],
)
def test_report_usage_refuses_each_bad_argument_by_name(arguments, field):
    given = {"workflow": Declared.name, "dimension": "tokens", "amount": 1, **arguments}
    with pytest.raises(InvalidInput) as refused:
        workflows.report_usage(
            given.pop("workflow"), given.pop("dimension"), given.pop("amount"), **given
        )
    assert refused.value.details.get("field", field) == field
    assert not UsageReport.objects.exists()
    assert not BudgetCounter.objects.exists()


def test_both_verbs_need_operate_run_even_for_a_user_named_by_code(caplog):
    viewer = staff("viewer", "view_run")
    with pytest.raises(PermissionDenied, match=r"workflows\.operate_run"):
        workflows.create_budget(Quiet, "tokens", limit=5, user=viewer)
    with pytest.raises(PermissionDenied, match=r"workflows\.operate_run"):
        workflows.report_usage(Declared, "tokens", 1, user=viewer)
    assert not RuntimeBudget.objects.exists() and not UsageReport.objects.exists()

    operator = staff("operator", "view_run", "operate_run")
    with caplog.at_level(logging.INFO, logger="workflows.budgets"):
        workflows.create_budget(Quiet, "tokens", limit=5, user=operator)
    assert (
        "budget 'tokens' of 'runtime_budget_quiet' per workflow created by operator: "
        "limit 5; 0 held units released" in caplog.messages
    )
    assert RuntimeBudget.objects.get().changed_by == "operator"


# -- the command -----------------------------------------------------------------------


def command(*args: str) -> str:
    return run_command("workflows_budgets", *args)


def test_the_command_creates_changes_and_reports():
    staff("ops", "operate_run")
    done = command("create", Quiet.name, "tokens", "--limit", "10", "--user", "ops")
    assert done == (
        "budget 'tokens' of runtime_budget_quiet per workflow created: limit 10, holds when "
        "used up; 0 counters set, 0 held steps and items released\n"
    )
    done = command(
        "create",
        Quiet.name,
        "tokens",
        "--limit",
        "12.5",
        "--period",
        "PT1H",
        "--on-exhausted",
        "fail",
    )
    assert done.startswith(
        "budget 'tokens' of runtime_budget_quiet per workflow changed: limit 12.5 every "
        "1\xa0hour, fails when used up"
    )
    done = command("report", Quiet.name, "tokens", "--amount", "13", "--user", "ops")
    assert done == "budget 'tokens' of runtime_budget_quiet: 13 used of 12.5 (exhausted)\n"
    assert UsageReport.objects.get().reported_by == "ops"
    (row,) = json.loads(command("list", "--json"))
    assert (row["breaches"], row["origin"], row["on_exhausted"]) == (1, "run time", "fail")
    made = json.loads(
        command("create", Quiet.name, "calls", "--limit", "3", "--per", "business_key", "--json")
    )
    assert (made["created"], made["budget"]["per"], made["version"]) == (True, "business_key", 1)
    (reported,) = json.loads(
        command("report", Quiet.name, "calls", "--amount", "1", "--key", "acme", "--json")
    )
    assert (reported["scope_key"], reported["used"]) == ("acme", "1.000000")


def test_the_command_refuses_create_and_report_with_a_message():
    staff("viewer", "view_run")
    with pytest.raises(CommandError, match="no workflow named 'nope' is registered"):
        command("create", "nope", "tokens", "--limit", "1")
    with pytest.raises(CommandError, match="invalid number value: 'ten'"):
        command("create", Quiet.name, "tokens", "--limit", "ten")
    with pytest.raises(CommandError, match="PERIOD must be seconds or an ISO 8601 duration"):
        command("create", Quiet.name, "tokens", "--limit", "1", "--period", "hourly")
    with pytest.raises(CommandError, match="period must be None or a positive timedelta"):
        command("create", Quiet.name, "tokens", "--limit", "1", "--period", "0")
    with pytest.raises(CommandError, match="invalid choice: 'customer'"):
        command("create", Quiet.name, "tokens", "--limit", "1", "--per", "customer")
    with pytest.raises(CommandError, match=r"workflows\.operate_run"):
        command("create", Quiet.name, "tokens", "--limit", "1", "--user", "viewer")
    with pytest.raises(CommandError, match="has no budget on 'dollars'"):
        command("report", Declared.name, "dollars", "--amount", "1")
    with pytest.raises(CommandError, match="amount must not be negative"):
        command("report", Declared.name, "tokens", "--amount", "-1")
    assert not RuntimeBudget.objects.exists() and not UsageReport.objects.exists()


# -- the admin page --------------------------------------------------------------------

BUDGETS = "admin:workflows_budgetcounter_changelist"
FORM = "admin:workflows_budget_form"


def test_the_admin_creates_a_budget_shows_it_and_its_breaches_and_edits_it(client):
    client.force_login(staff("operator", "view_run", "operate_run"))
    listed = client.get(reverse(BUDGETS)).content.decode()
    assert reverse(FORM) in listed and "Create a budget" in listed
    page = client.get(reverse(FORM))
    assert page.status_code == 200 and Quiet.name in page.content.decode()

    body = {
        "workflow": Quiet.name,
        "dimension": "tokens",
        "limit": "10",
        "per": "workflow",
        "period": "1:00:00",
        "on_exhausted": "hold",
    }
    done = client.post(reverse(FORM), body)
    assert done.status_code == 302 and done.url == reverse(BUDGETS)
    rule = RuntimeBudget.objects.get()
    assert (rule.limit, rule.period, rule.changed_by) == (10, timedelta(hours=1), "operator")
    entry = LogEntry.objects.get()
    assert entry.get_change_message().startswith(
        "budget “tokens” of runtime_budget_quiet per workflow created"
    )
    listed = client.get(reverse(BUDGETS)).content.decode()
    assert "Budgets set at run time" in listed and "runtime_budget_quiet" in listed

    workflows.report_usage(Quiet, "tokens", 12)
    listed = client.get(reverse(BUDGETS)).content.decode()
    assert "set at run time" in listed and "reached once, last " in listed
    edit = client.get(reverse(FORM), {"counter": counter(Quiet.name).pk}).content.decode()
    assert 'value="10"' in edit and "Change budget" in edit

    done = client.post(reverse(FORM), {**body, "limit": "20", "on_exhausted": "fail"})
    assert done.status_code == 302
    assert (RuntimeBudget.objects.get().limit, counter(Quiet.name).limit) == (20, 20)
    assert LogEntry.objects.count() == 2


def test_the_admin_form_shows_each_refusal_on_its_field_and_writes_nothing(client):
    client.force_login(staff("operator", "view_run", "operate_run"))
    body = {"workflow": Quiet.name, "dimension": "two words", "limit": "5", "per": "workflow"}
    refused = client.post(reverse(FORM), {**body, "on_exhausted": "hold"})
    assert refused.status_code == 200
    assert "dimension must be 1-60 letters" in refused.content.decode()
    refused = client.post(reverse(FORM), {**body, "dimension": "t", "limit": "-1"})
    text = refused.content.decode()
    assert "greater than or equal to 0" in text and "This field is required" in text
    refused = client.post(reverse(FORM), {**body, "workflow": "nope", "on_exhausted": "hold"})
    assert "Select a valid choice" in refused.content.decode()
    assert not RuntimeBudget.objects.exists() and not LogEntry.objects.exists()


def test_the_admin_form_needs_operate_run(client):
    client.force_login(staff("viewer", "view_run"))
    assert client.get(reverse(FORM)).status_code == 403
    assert client.post(reverse(FORM), {"workflow": Quiet.name}).status_code == 403
    assert "Create a budget" not in client.get(reverse(BUDGETS)).content.decode()
