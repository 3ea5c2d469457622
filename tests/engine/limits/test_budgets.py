"""Usage budgets: reports counted per workflow and per business key, periods, exhaustion,
operators raising and resetting (releasing held work to the executor), the command and
the admin page."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.conftest import SENT_WORK
from tests.support.commands import run_command
from tests.support.handlers import NOOP
from tests.support.users import staff
from workflows import FanOut, Retry, Task, Workflow
from workflows.context import Context
from workflows.definitions import Budget
from workflows.engine.limits.budgets import Exhaustion, exhausted, record_usage
from workflows.engine.work_kinds import ITEM, STEP
from workflows.errors import InvalidInput, WorkflowError
from workflows.models import BudgetCounter, FanOutItem, Run, Step, UsageReport
from workflows.services.budgets import budget_counters, budget_view, raise_budget, reset_budget
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.limits.test_budgets"
REFUSED: list[str] = []


@pytest.fixture(autouse=True)
def _reset():
    REFUSED.clear()
    SENT_WORK.clear()


def spend(ctx):
    ctx.report_usage("tokens", ctx.input["spend"])
    return ctx.input["spend"]


def spend_then_fail(ctx):
    ctx.report_usage("tokens", 2)
    raise RuntimeError("the call failed after it was paid for")


def misreport(ctx):
    for dimension, amount in [
        ("dollars", 1),
        ("tokens", -1),
        ("tokens", "5"),
        ("tokens", True),
        ("tokens", None),
        ("tokens", float("nan")),
        ("tokens", float("inf")),
        ("tokens", 10**18),
    ]:
        try:
            ctx.report_usage(dimension, amount)
        except ValueError as exc:
            REFUSED.append(str(exc))
    ctx.report_usage("tokens", Decimal("0.25"))
    ctx.report_usage("tokens", 0.5)


class Metered(Workflow):
    name = "budget_metered"
    budgets = [
        Budget("tokens", 100),
        Budget("tokens", 50, per="business_key"),
        Budget("calls", 10, on_exhausted="fail"),
    ]
    call = Task(f"{HERE}.spend")


class PaidFailure(Workflow):
    name = "budget_paid_failure"
    budgets = [Budget("tokens", 100)]
    call = Task(f"{HERE}.spend_then_fail", retry=Retry(max_attempts=2))


class Misreported(Workflow):
    name = "budget_misreported"
    budgets = [Budget("tokens", 100), Budget("calls", 5, per="business_key")]
    call = Task(f"{HERE}.misreport")


class Hourly(Workflow):
    name = "budget_hourly"
    budgets = [Budget("calls", 5, period=timedelta(hours=1))]
    call = Task(NOOP)


class Spread(Workflow):
    name = "budget_spread"
    budgets = [Budget("tokens", 10), Budget("tokens", 10, per="business_key")]
    each = FanOut(NOOP, items=lambda ctx: [1, 2, 3], max_parallel=3)


class Elsewhere(Workflow):
    name = "budget_elsewhere"
    budgets = [Budget("tokens", 10)]
    call = Task(NOOP, queue="gpu")


def counters() -> dict[tuple[str, str, str], Decimal]:
    return {
        (name, dimension, key): used
        for name, dimension, key, used in BudgetCounter.objects.values_list(
            "workflow_name", "dimension", "scope_key", "used"
        )
    }


def locked(run: Run) -> Run:
    return Run.objects.get(pk=run.pk)


# -- reporting -------------------------------------------------------------------------


def test_usage_is_recorded_and_summed_per_workflow_and_per_business_key():
    for key, amount in [("acme", 3), ("acme", 4.5), ("globex", 10), (None, 1)]:
        workflows.start_run(Metered, {"spend": amount}, business_key=key)
    run_pending()
    assert set(Run.objects.values_list("status", flat=True)) == {"completed"}
    assert counters() == {
        ("budget_metered", "tokens", ""): Decimal("18.5"),
        ("budget_metered", "tokens", "acme"): Decimal("7.5"),
        ("budget_metered", "tokens", "globex"): Decimal("10"),
        # the run without a business key counts only for the workflow
    }
    reports = UsageReport.objects.order_by("id")
    assert [(r.dimension, r.amount, r.attempt) for r in reports] == [
        ("tokens", Decimal("3"), 1),
        ("tokens", Decimal("4.5"), 1),
        ("tokens", Decimal("10"), 1),
        ("tokens", Decimal("1"), 1),
    ]
    assert all(r.step.name == "call" and r.step.run_id == r.run_id for r in reports)
    acme = BudgetCounter.objects.get(scope_key="acme")
    assert (acme.limit, acme.version) == (Decimal(50), 3)  # created, then two additions


def test_usage_stays_recorded_when_the_attempt_fails():
    run = workflows.start_run(PaidFailure)
    run_pending(until=timezone.now() + timedelta(minutes=1))
    assert locked(run).status == "failed"
    assert list(UsageReport.objects.values_list("attempt", "amount")) == [
        (1, Decimal(2)),
        (2, Decimal(2)),
    ]
    assert counters() == {("budget_paid_failure", "tokens", ""): Decimal(4)}


def test_report_usage_refuses_undeclared_dimensions_and_bad_amounts_and_records_nothing():
    run = workflows.start_run(Misreported, business_key="acme")
    run_pending()
    assert locked(run).status == "completed"
    assert REFUSED[0] == (
        "workflow 'budget_misreported' v1 has no budget on 'dollars' "
        "(budget dimensions: 'calls', 'tokens')"
    )
    assert REFUSED[1:] == [
        "usage amount must not be negative, got -1",
        "usage amount must be a number (int, float or Decimal), got '5'",
        "usage amount must be a number (int, float or Decimal), got True",
        "usage amount must be a number (int, float or Decimal), got None",
        "usage amount must be a finite number, got nan",
        "usage amount must be a finite number, got inf",
        f"usage amount must be less than 10**18, got {10**18}",
    ]
    # Only the two good reports: 0.25 and 0.5 (read as written, not as binary floats).
    assert [r.amount for r in UsageReport.objects.order_by("id")] == [
        Decimal("0.25"),
        Decimal("0.5"),
    ]
    assert counters() == {("budget_misreported", "tokens", ""): Decimal("0.75")}


def test_report_usage_outside_a_running_handler_is_refused():
    ctx = Context(run_id=None, input={}, step_names=())  # what a when= condition gets
    with pytest.raises(WorkflowError, match="only available inside a running handler"):
        ctx.report_usage("tokens", 1)


# -- exhaustion and periods ------------------------------------------------------------


def test_exhausted_names_the_first_budget_used_up_for_the_run():
    acme = workflows.start_run(Metered, {"spend": 0}, business_key="acme")
    globex = workflows.start_run(Metered, {"spend": 0}, business_key="globex")
    keyless = workflows.start_run(Metered, {"spend": 0})
    assert exhausted(Metered, locked(acme)) is None  # nothing reported yet

    record_usage(acme.pk, None, 1, Metered, "tokens", 50)
    found = exhausted(Metered, locked(acme))
    assert found == Exhaustion(
        workflow_name="budget_metered",
        dimension="tokens",
        per="business_key",
        scope_key="acme",
        used=Decimal(50),
        limit=Decimal(50),
        on_exhausted="hold",
    )
    assert found.held_on == "budget:tokens"
    error = found.error()
    assert error.code == "budget_exhausted"
    assert error.message == (
        "budget 'tokens' of workflow 'budget_metered' for business key 'acme' is "
        "exhausted: 50 used of 50"
    )
    assert error.details["on_exhausted"] == "hold"
    # Other keys, and runs without one, are covered only by the workflow's budget.
    assert exhausted(Metered, locked(globex)) is None
    assert exhausted(Metered, locked(keyless)) is None

    record_usage(globex.pk, None, 1, Metered, "tokens", 50)
    record_usage(keyless.pk, None, 1, Metered, "calls", 10)
    found = exhausted(Metered, locked(keyless))
    assert (found.dimension, found.per, found.on_exhausted) == ("tokens", "workflow", "hold")
    assert found.used == Decimal(100)
    raise_budget("budget_metered", "tokens", limit=1000)
    found = exhausted(Metered, locked(keyless))
    assert (found.dimension, found.on_exhausted, found.used) == ("calls", "fail", 10)


def test_a_budget_with_a_limit_of_zero_is_exhausted_before_any_report():
    class Closed(Workflow, register=False):
        name = "budget_closed"
        budgets = [Budget("tokens", 0)]
        call = Task(NOOP)

    run = workflows.start_run(Metered, {"spend": 0})
    assert exhausted(Closed, locked(run)).limit == 0
    assert not BudgetCounter.objects.exists()  # a pure read


def test_a_period_that_has_ended_counts_as_empty_and_the_next_report_starts_a_new_one():
    run = workflows.start_run(Hourly)
    record_usage(run.pk, None, 1, Hourly, "calls", 5)
    counter = BudgetCounter.objects.get()
    started = counter.period_started_at
    assert started is not None and counter.used == 5
    assert exhausted(Hourly, locked(run)).used == 5

    ended = timezone.now() - timedelta(hours=2)
    BudgetCounter.objects.filter(pk=counter.pk).update(period_started_at=ended)
    assert exhausted(Hourly, locked(run)) is None  # the period is over

    record_usage(run.pk, None, 1, Hourly, "calls", 2)
    counter.refresh_from_db()
    assert counter.used == 2  # started again at 0, then added
    assert counter.period_started_at > ended
    assert counter.version == 5  # created, added, restarted, added
    view = budget_view(budget_counters().get())
    assert view.period_ends_at == counter.period_started_at + timedelta(hours=1)
    assert (view.used, view.exhausted) == (2, False)


# -- operators: raise and reset release held work --------------------------------------


def hold(model: type[Step] | type[FanOutItem], dimension: str = "tokens", **where: Any) -> list:
    """Mark ready units held, as the claim does when a budget is used up."""
    units = model.objects.filter(status="ready", **where)
    ids = list(units.values_list("id", flat=True))
    model.objects.filter(pk__in=ids).update(held_on=f"budget:{dimension}")
    SENT_WORK.clear()  # what starting the runs sent
    return sorted(ids)


def versions(model: type[Step] | type[FanOutItem], ids: list[int]) -> dict[int, int]:
    return dict(model.objects.filter(pk__in=ids).values_list("id", "version"))


def test_raising_a_budget_releases_its_held_steps_and_items_and_sends_them(recording):
    acme = workflows.start_run(Metered, {"spend": 1}, business_key="acme")
    spread = workflows.start_run(Spread, business_key="acme")
    gpu = workflows.start_run(Elsewhere)
    held_steps = hold(Step, run=acme)
    held_items = hold(FanOutItem, step__run=spread)
    other = hold(Step, run=gpu)
    assert len(held_steps) == 1 and len(held_items) == 3
    record_usage(spread.pk, None, 1, Spread, "tokens", 10)
    before = versions(FanOutItem, held_items)

    change = raise_budget("budget_spread", "tokens", limit=20)
    assert (change.limit_before, change.limit, change.used) == (10, 20, 10)
    assert change.released == 3
    assert not FanOutItem.objects.filter(pk__in=held_items).exclude(held_on="").exists()
    assert versions(FanOutItem, held_items) == {pk: v + 1 for pk, v in before.items()}
    assert sorted((work.kind.name, work.unit_id) for work in recording) == [
        (ITEM.name, pk) for pk in held_items
    ]
    # Other workflows' held work is not touched.
    assert Step.objects.get(pk=held_steps[0]).held_on == "budget:tokens"
    assert Step.objects.get(pk=other[0]).held_on == "budget:tokens"

    recording.clear()
    change = raise_budget("budget_elsewhere", "tokens", limit=20)
    assert change.released == 1
    (work,) = recording
    assert (work.kind, work.unit_id, work.route.queue) == (STEP, other[0], "gpu")


def test_resetting_a_business_keys_budget_releases_only_that_keys_runs(recording):
    acme = workflows.start_run(Metered, {"spend": 1}, business_key="acme")
    globex = workflows.start_run(Metered, {"spend": 1}, business_key="globex")
    record_usage(acme.pk, None, 1, Metered, "tokens", 50)
    acme_held, globex_held = hold(Step, run=acme), hold(Step, run=globex)
    not_tokens = hold(FanOutItem)  # nothing else is held on tokens

    change = reset_budget("budget_metered", "tokens", scope_key="acme")
    assert (change.used_before, change.used, change.limit) == (50, 0, 50)
    assert change.released == 1
    assert [(w.kind, w.unit_id) for w in recording] == [(STEP, acme_held[0])]
    assert Step.objects.get(pk=acme_held[0]).held_on == ""
    assert Step.objects.get(pk=globex_held[0]).held_on == "budget:tokens"
    assert not_tokens == []
    assert counters()[("budget_metered", "tokens", "acme")] == 0
    assert counters()[("budget_metered", "tokens", "")] == 50  # the workflow's is kept
    run_pending()
    assert locked(acme).status == "completed"


def test_a_unit_no_longer_ready_or_held_on_another_budget_is_not_released(recording):
    run = workflows.start_run(Metered, {"spend": 1})
    (step_id,) = hold(Step, "calls", run=run)
    assert raise_budget("budget_metered", "tokens", limit=500).released == 0
    assert recording == []
    Step.objects.filter(pk=step_id).update(status="running", held_on="budget:tokens")
    assert reset_budget("budget_metered", "tokens").released == 0
    assert Step.objects.get(pk=step_id).held_on == "budget:tokens"


def test_raise_and_reset_refuse_what_is_not_a_declared_budget_or_a_valid_limit():
    with pytest.raises(InvalidInput, match="has no budget on 'dollars' per workflow"):
        raise_budget("budget_metered", "dollars", limit=5)
    with pytest.raises(InvalidInput, match="has no budget on 'calls' per business_key"):
        reset_budget("budget_metered", "calls", scope_key="acme")
    with pytest.raises(InvalidInput, match="no workflow named 'nope' is registered"):
        reset_budget("nope", "tokens")
    for bad, message in [
        (-1, "limit must not be negative"),
        ("lots", "limit is not a number: 'lots'"),
        (True, "limit must be a number"),
        (10**18, "limit must be less than 10\\*\\*18"),
    ]:
        with pytest.raises(InvalidInput, match=message) as refused:
            raise_budget("budget_metered", "tokens", limit=bad)
        assert refused.value.details == {"field": "limit"}
    assert not BudgetCounter.objects.exists()
    # A declared budget nobody reported against yet can be raised: its counter appears.
    assert raise_budget("budget_metered", "tokens", limit="250.5").limit == Decimal("250.5")


def test_operators_need_operate_run_and_are_logged(caplog):
    viewer = staff("viewer", "view_run")
    operator = staff("operator", "view_run", "operate_run")
    with pytest.raises(PermissionDenied, match=r"workflows\.operate_run"):
        raise_budget("budget_metered", "tokens", limit=5, user=viewer)
    with caplog.at_level(logging.INFO, logger="workflows.budgets"):
        reset_budget("budget_metered", "tokens", user=operator)
    assert (
        "budget 'tokens' of 'budget_metered': usage reset from 0 to 0 by operator; "
        "0 held units released"
    ) in caplog.messages


# -- the command -----------------------------------------------------------------------


def command(*args: str) -> str:
    return run_command("workflows_budgets", *args)


def test_the_command_lists_raises_and_resets(recording):
    staff("ops", "operate_run")
    acme = workflows.start_run(Metered, {"spend": 1}, business_key="acme")
    record_usage(acme.pk, None, 1, Metered, "tokens", 50)
    hold(Step, run=acme)
    assert command() == command("list")
    lines = command().splitlines()
    assert lines[0].split() == [
        "ID",
        "WORKFLOW",
        "DIMENSION",
        "PER",
        "KEY",
        "USED",
        "LIMIT",
        "PERIOD",
        "ENDS",
        "WHEN",
        "EXHAUSTED",
        "HELD",
        "BREACHES",
    ]
    assert [line.split()[1:] for line in lines[1:]] == [
        ["budget_metered", "tokens", "workflow", "-", "50", "100", "-", "hold", "1", "0"],
        ["budget_metered", "tokens", "business_key", "acme", "50", "50", "-", "hold", "1", "1"],
    ]
    done = command("raise", "budget_metered", "tokens", "--key", "acme", "--limit", "75")
    assert done == (
        "budget 'tokens' of budget_metered for business key 'acme': 50 used of 75 "
        "(was 50 of 50); 1 held steps and items released\n"
    )
    done = command("reset", "budget_metered", "tokens", "--user", "ops")
    assert done.startswith("budget 'tokens' of budget_metered: 0 used of 100 (was 50 of 100)")
    listed = {(row["dimension"], row["scope_key"]): row for row in _json(command("--json"))}
    assert listed[("tokens", "acme")]["limit"] == "75.000000"
    assert listed[("tokens", "")]["used"] == "0.000000"
    assert _json(command("list", "--workflow", "other", "--json")) == []


def _json(text: str) -> Any:
    return json.loads(text)


def test_the_command_refuses_with_a_message():
    with pytest.raises(CommandError, match="has no budget on 'dollars'"):
        command("reset", "budget_metered", "dollars")
    with pytest.raises(CommandError, match="invalid number value: 'ten'"):
        command("raise", "budget_metered", "tokens", "--limit", "ten")
    with pytest.raises(CommandError, match="limit must not be negative"):
        command("raise", "budget_metered", "tokens", "--limit", "-3")
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        command("reset", "budget_metered", "tokens", "--user", "ghost")
    assert command() == "no budget has been used yet\n"


# -- the admin page --------------------------------------------------------------------

BUDGETS = "admin:workflows_budgetcounter_changelist"


def act(counter: BudgetCounter, verb: str) -> str:
    return reverse("admin:workflows_budget_act", args=[counter.pk, verb])


def used_up_budget() -> BudgetCounter:
    run = workflows.start_run(Metered, {"spend": 1}, business_key="acme")
    record_usage(run.pk, None, 1, Metered, "tokens", 100)
    hold(Step, run=run)
    return BudgetCounter.objects.get(scope_key="")


def test_the_admin_lists_budgets_and_raises_one_after_confirmation(client, recording):
    counter = used_up_budget()
    client.force_login(staff("operator", "view_run", "operate_run"))
    page = client.get(reverse(BUDGETS))
    assert page.status_code == 200
    text = page.content.decode()
    assert (
        "budget_metered" in text
        and "(all runs)" in text
        and 'class="wf-badge st-paused">1<' in text
    )
    assert act(counter, "raise") in text and act(counter, "reset") in text

    confirm = client.get(act(counter, "raise"))
    assert confirm.status_code == 200
    assert "100 used of 100" in confirm.content.decode()
    assert "1 held step and item will be sent to workers again" in confirm.content.decode()
    refused = client.post(act(counter, "raise"), {"limit": "-5"})
    assert refused.status_code == 200  # the form again, with the error
    assert "greater than or equal to 0" in refused.content.decode()

    done = client.post(act(counter, "raise"), {"limit": "150"})
    assert done.status_code == 302 and done.url == reverse(BUDGETS)
    counter.refresh_from_db()
    assert counter.limit == 150
    entry = LogEntry.objects.get(object_id=str(counter.pk))
    assert entry.user.username == "operator"
    assert entry.get_change_message() == (
        "limit set from 100 to 150; 1 held steps and items released"
    )
    assert len(recording) == 1

    done = client.post(act(counter, "reset"), {})
    counter.refresh_from_db()
    assert counter.used == 0
    assert LogEntry.objects.count() == 2


def test_the_admin_budget_actions_need_operate_run(client):
    counter = used_up_budget()
    client.force_login(staff("viewer", "view_run"))
    page = client.get(reverse(BUDGETS))
    assert page.status_code == 200
    assert act(counter, "raise") not in page.content.decode()
    assert client.get(act(counter, "raise")).status_code == 403
    assert client.post(act(counter, "reset"), {}).status_code == 403
    counter.refresh_from_db()
    assert counter.used == 100
    client.force_login(staff("nobody"))
    assert client.get(reverse(BUDGETS)).status_code == 403


def test_the_admin_has_no_add_change_or_delete_of_counters(client):
    counter = used_up_budget()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert client.get(reverse("admin:workflows_budgetcounter_add")).status_code == 403
    assert (
        client.post(
            reverse("admin:workflows_budgetcounter_delete", args=[counter.pk]), {}
        ).status_code
        == 403
    )
    page = client.get(act(counter, "grow"), follow=True)
    assert "There is no budget action called “grow”." in page.content.decode()


# -- end to end, through the claim -----------------------------------------------------


def spend_ten(ctx):
    ctx.report_usage("tokens", 10)
    return ctx.step_name


class HeldChain(Workflow):
    name = "budget_held_chain"
    budgets = [Budget("tokens", 10)]
    first = Task(f"{HERE}.spend_ten")
    second = Task(f"{HERE}.spend_ten")


class FailingChain(Workflow):
    name = "budget_failing_chain"
    budgets = [Budget("tokens", 10, on_exhausted="fail")]
    first = Task(f"{HERE}.spend_ten")
    second = Task(f"{HERE}.spend_ten")


def test_a_used_up_hold_budget_holds_the_next_step_until_it_is_raised():
    run = workflows.start_run(HeldChain)
    run_pending()
    second = Step.objects.get(run=run, name="second")
    assert (second.status, second.held_on) == ("ready", "budget:tokens")
    assert raise_budget("budget_held_chain", "tokens", limit=100).released == 1
    run_pending()
    assert locked(run).status == "completed"
    assert counters() == {("budget_held_chain", "tokens", ""): Decimal(20)}


def test_a_used_up_fail_budget_fails_the_run_with_budget_exhausted():
    run = workflows.start_run(FailingChain)
    run_pending()
    run = locked(run)
    assert run.status == "failed"
    second = Step.objects.get(run=run, name="second")
    assert second.status == "failed"
    assert "budget_exhausted" in str(second.error) or "exhausted" in str(second.error)


class HourlyChain(Workflow):
    name = "budget_hourly_chain"
    budgets = [Budget("tokens", 10, period=timedelta(hours=1))]
    first = Task(f"{HERE}.spend_ten")
    second = Task(f"{HERE}.spend_ten")


def test_the_sweep_sends_budget_held_work_only_once_the_budget_admits_it(recording):
    """Issue #35, point 9: the recovery pass used to send a budget-held step to a worker
    on every pass (and the worker held it again, with a log line each time)."""
    from workflows.engine import claim_step
    from workflows.workers.scanners import nudge_held_work

    run = workflows.start_run(HourlyChain)
    run_pending()
    second = Step.objects.get(run=run, name="second")
    assert (second.status, second.held_on) == ("ready", "budget:tokens")
    SENT_WORK.clear()

    for _ in range(3):  # the budget is used up: nothing is sent, pass after pass
        result = nudge_held_work()
        assert (result.found, result.done, result.errors) == (1, 0, 0)
    assert SENT_WORK == []

    # The period ends (no transition hands the hold on): the next pass sends it once.
    BudgetCounter.objects.filter(workflow_name="budget_hourly_chain").update(
        period_started_at=timezone.now() - timedelta(hours=2)
    )
    assert nudge_held_work().done == 1
    assert [(work.kind, work.unit_id) for work in SENT_WORK] == [(STEP, second.pk)]
    lease = claim_step(second.pk, "worker-a")  # and the budget admits it there too
    assert (lease.attempt, Step.objects.get(pk=second.pk).held_on) == (1, "")
