"""Races on waiting steps with real threads and committed transactions."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest
from django.contrib.auth.models import User

import workflows
from workflows import FanOut, Gate, GateAlreadyDecided, InvalidTransition, Task, Workflow
from workflows.engine import ITEM
from workflows.models import FanOutItem, Run, Step
from workflows.testing import run_pending
from workflows.workers.runner import execute

pytestmark = pytest.mark.django_db(transaction=True)

HERE = "tests.engine.leases.test_waiting_races"


def noop(ctx):
    return ctx.item


class Approval(Workflow):
    name = "race_approval"
    gate = Gate(prompt="ok?")
    after = Task(f"{HERE}.noop")


class Thousand(Workflow):
    name = "race_thousand"
    work = FanOut(f"{HERE}.noop", items=lambda ctx: list(range(1000)), max_parallel=1000)


def new_gates(rounds: int = 5) -> Iterator[tuple[Run, Step]]:
    """A new run of :class:`Approval` and its gate, once a round: each round races anew."""
    for _ in range(rounds):
        run = workflows.start_run(Approval)
        yield run, run.steps.get(name="gate")


def test_two_concurrent_approvals_one_wins_and_the_run_advances_once(concurrently):
    approver = User.objects.create_user("approver")
    colleague = User.objects.create_user("colleague")
    for run, gate in new_gates():
        results = concurrently(
            partial(workflows.approve_gate, gate.pk, user=approver),
            partial(workflows.reject_gate, gate.pk, user=colleague),
        )
        conflicts = [r for r in results if isinstance(r, GateAlreadyDecided)]
        assert len(conflicts) == 1, results
        assert run.events.filter(type="gate.decided").count() == 1
        gate.refresh_from_db()
        after = run.steps.get(name="after")
        if gate.decision == "approved":
            assert after.status == "ready"
            assert run.events.filter(step=after, type="step.ready").count() == 1
        else:
            assert after.status == "cancelled"


def test_a_thousand_items_finishing_on_several_threads_count_exactly(concurrently):
    run = workflows.start_run(Thousand)
    step = run.steps.get()
    ids = list(FanOutItem.objects.filter(step=step).values_list("id", flat=True))
    assert len(ids) == 1000

    def worker(share: list[int], name: str) -> int:
        return sum(execute(ITEM, pk, owner=name, chain=False) for pk in share)

    shares = [ids[n::4] for n in range(4)]
    results = concurrently(*(partial(worker, share, f"t{n}") for n, share in enumerate(shares)))
    assert results == [250, 250, 250, 250], results
    step.refresh_from_db()
    run.refresh_from_db()
    assert (step.items_completed, step.items_failed, step.items_skipped) == (1000, 0, 0)
    assert step.status == "completed"
    assert step.output == list(range(1000))
    assert run.events.filter(step=step, type="step.completed").count() == 1
    assert run.status == "completed"
    run_pending()


def test_a_skip_racing_a_decision_one_wins_and_one_decision_is_recorded(concurrently):
    """A decider's approval and an override's skip of one gate, on two connections: one
    wins, the loser writes nothing and is told the gate moved on."""
    approver = User.objects.create_user("approver")
    overrider = User.objects.create_superuser("overrider")
    for run, gate in new_gates():
        results = concurrently(
            partial(workflows.approve_gate, gate.pk, user=approver),
            partial(workflows.skip_step, gate.pk, user=overrider, output={"feedback": "x"}),
        )
        losers = [r for r in results if isinstance(r, GateAlreadyDecided | InvalidTransition)]
        assert len(losers) == 1, results
        decisions = run.events.filter(type__in=["gate.decided", "gate.overridden"])
        assert decisions.count() == 1
        assert run.events.filter(type="step.skipped").count() == (
            1 if decisions.get().payload.get("via") == "skip" else 0
        )
        assert run.steps.get(name="after").status == "ready"
        assert run.events.filter(type="step.ready", step__name="after").count() == 1
