"""Operators' reports and budget changes racing on real connections: every report is
counted, a crossing of the limit is counted as one breach whoever made it, and two
creations of one budget at once leave one row with the later values.

Committed for real (``transaction=True``) so the threads' connections see each other's
rows; on PostgreSQL they meet on the counter's row and the unique constraints, on
SQLite on the write lock.
"""

from __future__ import annotations

from decimal import Decimal
from functools import partial

import pytest

import workflows
from tests.support.handlers import NOOP
from workflows import Task, Workflow
from workflows.models import BudgetCounter, RuntimeBudget, UsageReport

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 6


class Shared(Workflow):
    name = "runtime_budget_shared"
    call = Task(NOOP)


def test_two_reports_at_once_are_both_counted_and_their_crossing_is_one_breach(concurrently):
    workflows.create_budget(Shared, "tokens", limit=10 * ROUNDS, per="business_key")
    for round_ in range(ROUNDS):
        key = f"customer-{round_}"
        workflows.report_usage(Shared, "tokens", 10 * ROUNDS - 10, scope_key=key)
        # Together they cross the limit: whichever adds second crosses it.
        outcomes = concurrently(
            partial(workflows.report_usage, Shared, "tokens", 6, scope_key=key),
            partial(workflows.report_usage, Shared, "tokens", Decimal("4.5"), scope_key=key),
        )
        assert [len(views) for views in outcomes] == [1, 1]
        counter = BudgetCounter.objects.get(scope_key=key)
        assert counter.used == 10 * ROUNDS + Decimal("0.5")
        assert (counter.breaches, counter.version) == (1, 4)  # created, three adds
    assert UsageReport.objects.count() == 3 * ROUNDS


def test_two_creations_of_one_budget_at_once_leave_one_row(concurrently):
    for round_ in range(ROUNDS):
        dimension = f"calls-{round_}"
        made = concurrently(
            partial(workflows.create_budget, Shared, dimension, limit=5),
            partial(workflows.create_budget, Shared, dimension, limit=7),
        )
        rule = RuntimeBudget.objects.get(dimension=dimension)
        # One created it; the other found it (after waiting for its commit) and changed it.
        assert sorted((m.created, m.version) for m in made) == [(False, 2), (True, 1)]
        later = next(m for m in made if not m.created)
        assert (rule.version, rule.limit) == (2, Decimal(later.budget.limit))
