"""Usage reports racing on real connections: none is lost, whether the counter does not
exist yet or its period has just ended, and a raise racing reports keeps both.

Each test commits for real (``transaction=True``) so that the threads' connections see
each other's rows; on PostgreSQL the reports meet on the counter's row and its unique
constraint, on SQLite on the write lock.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from functools import partial

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from tests.support.threads import run_concurrently
from workflows import Task, Workflow
from workflows.definitions import Budget
from workflows.engine.limits.budgets import record_usage
from workflows.models import BudgetCounter, UsageReport
from workflows.services.budgets import raise_budget

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 8


class Raced(Workflow):
    name = "budget_raced"
    budgets = [
        Budget("tokens", 1000),
        Budget("tokens", 1000, per="business_key"),
        Budget("calls", 1000, per="business_key", period=timedelta(hours=1)),
    ]
    call = Task(NOOP)


def test_two_first_reports_at_once_lose_nothing():
    for round_ in range(ROUNDS):
        key = f"customer-{round_}"
        first = workflows.start_run(Raced, business_key=key)
        second = workflows.start_run(Raced, business_key=key)
        outcomes = run_concurrently(
            partial(record_usage, first.pk, None, 1, Raced, "tokens", 3),
            partial(record_usage, second.pk, None, 1, Raced, "tokens", Decimal("4.5")),
        )
        assert outcomes == [None, None]
        counter = BudgetCounter.objects.get(dimension="tokens", scope_key=key)
        assert (counter.used, counter.version) == (Decimal("7.5"), 3)  # created, +3, +4.5
    workflow_counter = BudgetCounter.objects.get(dimension="tokens", scope_key="")
    assert workflow_counter.used == Decimal("7.5") * ROUNDS
    assert workflow_counter.version == 1 + 2 * ROUNDS
    assert UsageReport.objects.count() == 2 * ROUNDS


def test_two_reports_at_the_end_of_a_period_restart_it_once_and_both_count():
    for round_ in range(ROUNDS):
        key = f"period-{round_}"
        run = workflows.start_run(Raced, business_key=key)
        record_usage(run.pk, None, 1, Raced, "calls", 900)
        ended = timezone.now() - timedelta(hours=2)
        BudgetCounter.objects.filter(dimension="calls", scope_key=key).update(
            period_started_at=ended
        )
        outcomes = run_concurrently(
            partial(record_usage, run.pk, None, 2, Raced, "calls", 1),
            partial(record_usage, run.pk, None, 2, Raced, "calls", 2),
        )
        assert outcomes == [None, None]
        counter = BudgetCounter.objects.get(dimension="calls", scope_key=key)
        assert counter.used == 3  # the old period's 900 are gone, neither report is
        assert counter.period_started_at > ended


def test_a_raise_racing_reports_keeps_the_new_limit_and_every_report():
    run = workflows.start_run(Raced, business_key="acme")
    record_usage(run.pk, None, 1, Raced, "tokens", 1)
    outcomes = run_concurrently(
        *[partial(record_usage, run.pk, None, 1, Raced, "tokens", 1) for _ in range(4)],
        partial(raise_budget, "budget_raced", "tokens", limit=5000),
    )
    assert all(outcome is None for outcome in outcomes[:4])
    counter = BudgetCounter.objects.get(dimension="tokens", scope_key="")
    assert (counter.used, counter.limit) == (5, 5000)
