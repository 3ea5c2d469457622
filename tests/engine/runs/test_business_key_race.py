"""Two setters (and two starts) racing for one unique business key: the database's
partial unique index lets exactly one through, on two real connections.

Each test commits for real (``transaction=True``) so that the threads' connections see
each other's rows; on PostgreSQL both transactions run at once and the index decides.
"""

from __future__ import annotations

import pytest

import workflows
from tests.engine.runs.test_run_metadata import Keyed
from tests.support.threads import run_concurrently
from workflows import BusinessKeyInUse
from workflows.models import Event, Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_of_two_setters_of_one_unique_key_exactly_one_wins():
    first, second = workflows.start_run(Keyed), workflows.start_run(Keyed)
    outcomes = run_concurrently(
        lambda: workflows.set_business_key(first, "ORDER-1"),
        lambda: workflows.set_business_key(second, "ORDER-1"),
    )
    won = [outcome for outcome in outcomes if isinstance(outcome, Run)]
    lost = [outcome for outcome in outcomes if isinstance(outcome, BusinessKeyInUse)]
    assert (len(won), len(lost)) == (1, 1), outcomes
    assert list(Run.objects.filter(business_key="ORDER-1").values_list("pk", flat=True)) == [
        won[0].pk
    ]
    assert Event.objects.filter(type="run.business_key_set").count() == 1


def test_of_two_starts_with_one_unique_key_exactly_one_creates_a_run():
    outcomes = run_concurrently(
        lambda: workflows.start_run(Keyed, business_key="ORDER-2"),
        lambda: workflows.start_run(Keyed, business_key="ORDER-2"),
    )
    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["BusinessKeyInUse", "Run"]
    assert Run.objects.filter(business_key="ORDER-2").count() == 1
