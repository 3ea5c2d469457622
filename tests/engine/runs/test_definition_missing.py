"""One path for a run whose (name, version) is not registered in this process.

Whatever finds out (a claim, a timer, a decision, a signal, a repair) fails the run
with ``definition_missing`` in a transition that commits, and raises
``DefinitionMissing`` to its caller; scanners count the run as handled. Cancelling
such a run still works: an operator must be able to stop it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from workflows import DefinitionMissing, FanOut, Gate, Sleep, Task, Workflow
from workflows.engine import ITEM, claim
from workflows.models import FanOutItem, Run, Step, Timer
from workflows.workers.scanners import fire_due_timers

pytestmark = pytest.mark.django_db


class Sleepy(Workflow):
    name = "missing_sleepy"
    nap = Sleep(timedelta(minutes=5))
    after_nap = Task(NOOP)


class Gated(Workflow):
    name = "missing_gated"
    approve = Gate(prompt="go?")


class Spread(Workflow):
    name = "missing_spread"
    each = FanOut(NOOP, items=lambda ctx: [1, 2])


def assert_failed_for_missing_definition(run: Run) -> None:
    run.refresh_from_db()
    assert (run.status, run.error["code"]) == ("failed", "definition_missing")
    assert run.events.filter(type="run.failed").count() == 1


def test_a_timer_of_a_run_whose_definition_is_gone_fails_the_run(unregistered):
    run = workflows.start_run(Sleepy)
    unregistered(Sleepy)
    result = fire_due_timers(now=timezone.now() + timedelta(minutes=10))
    assert (result.found, result.done, result.errors) == (1, 1, 0)
    assert_failed_for_missing_definition(run)
    assert not Timer.objects.filter(run=run, status="scheduled").exists()


def test_a_decision_on_a_run_whose_definition_is_gone_fails_the_run(unregistered):
    user = User.objects.create_user("decider")
    run = workflows.start_run(Gated)
    unregistered(Gated)
    with pytest.raises(DefinitionMissing, match="'missing_gated' v1 is not registered"):
        workflows.approve_gate(Step.objects.get(run=run), user=user)
    assert_failed_for_missing_definition(run)
    assert Step.objects.get(run=run).status == "cancelled"


def test_claiming_an_item_of_a_run_whose_definition_is_gone_fails_the_run(unregistered):
    run = workflows.start_run(Spread)
    unregistered(Spread)
    item = FanOutItem.objects.filter(step__run=run).first()
    with pytest.raises(DefinitionMissing):
        claim(ITEM, item.pk, "worker")
    assert_failed_for_missing_definition(run)
    assert set(FanOutItem.objects.values_list("status", flat=True)) == {"skipped"}


def test_a_run_whose_definition_is_gone_can_still_be_cancelled(unregistered):
    run = workflows.start_run(Gated)
    unregistered(Gated)
    workflows.cancel_run(run, reason="code removed")
    run.refresh_from_db()
    assert (run.status, run.error["code"]) == ("cancelled", "cancelled")
