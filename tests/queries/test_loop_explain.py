"""Loops on the read side: ``explain`` says which round each loop is in and what ends it,
and a polling task between two iterations waits for its next poll (in ``explain`` and in
``pending_waits``), not for a callback; at no extra query."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

import workflows
from tests.queries.test_explain import cost
from tests.support.handlers import ASK_BANK, NOOP
from tests.support.loop_review import rejected
from workflows import Gate, Loop, Task, Workflow
from workflows.models import Run, Step, Timer
from workflows.queries.explain import QUERIES
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.queries.test_loop_explain"
EVERY = timedelta(minutes=5)


def never(ctx: Any) -> bool:
    return False


class Review(Workflow):
    name = "explain_loop_review"
    draft = Task(NOOP)
    review = Gate(prompt="Publish?", on_reject="continue")
    again = Loop(back_to="draft", while_=rejected, max_iterations=5)
    publish = Task(NOOP)


class Polled(Workflow):
    name = "explain_loop_polled"
    wait = Task(NOOP, repeat_until=never, every=EVERY, max_iterations=4, on_exhausted="continue")


class Bank(Workflow):
    name = "explain_loop_bank"
    ask = Task(ASK_BANK)


def review_round(run: Run) -> Step:
    run_pending()
    return Step.objects.get(run=run, name="review", status="waiting")


def test_explain_says_which_round_a_loop_is_in_and_what_ends_it():
    reviewer = User.objects.create_user("reviewer")
    run = workflows.start_run(Review)
    workflows.reject_gate(review_round(run), user=reviewer, feedback="shorter")
    review_round(run)

    explanation = workflows.explain(run)
    [loop] = explanation.loops
    assert loop == {
        "kind": "loop",
        "loop": "again",
        "status": "pending",
        "back_to": "draft",
        "body": ["draft", "review"],
        "iteration": 2,
        "max_iterations": 5,
        "on_exhausted": "fail",
        "every_seconds": None,
        "next_poll_at": None,
        "ends_when": (
            "review ends and “rejected” no longer holds, or after 5 iterations (then the run fails)"
        ),
    }
    assert explanation.as_dict()["loops"] == [loop]
    assert cost(run) == QUERIES


def test_a_workflow_without_loops_explains_none():
    run = workflows.start_run(Bank)
    assert workflows.explain(run).loops == ()
    assert workflows.explain(run).as_dict()["loops"] == []


def test_a_poll_between_iterations_waits_for_its_next_poll_not_a_callback():
    run = workflows.start_run(Polled)
    run_pending()
    repeat = Timer.objects.get(run=run, kind="repeat", status="scheduled")

    explanation = workflows.explain(run)
    [waiting] = explanation.waiting_on
    assert (waiting.kind, waiting.step) == ("poll", "wait")
    assert waiting.details == {
        "iteration": 2,
        "max_iterations": 4,
        "due_at": repeat.due_at,
        "message": "waiting for its next poll (iteration 2 of at most 4)",
    }
    [poll] = explanation.loops
    assert poll == {
        "kind": "poll",
        "loop": "wait",
        "status": "waiting",
        "back_to": "wait",
        "body": ["wait"],
        "iteration": 2,
        "max_iterations": 4,
        "on_exhausted": "continue",
        "every_seconds": EVERY.total_seconds(),
        "next_poll_at": repeat.due_at,
        "ends_when": (
            "an iteration ends and “never” holds, or after 4 iterations (then the run goes on)"
        ),
    }
    assert explanation.as_dict()["loops"][0]["next_poll_at"] == repeat.due_at.isoformat()
    assert cost(run) == QUERIES


def test_pending_waits_lists_a_poll_apart_from_callbacks():
    polled, bank = workflows.start_run(Polled), workflows.start_run(Bank)
    run_pending()
    repeat = Timer.objects.get(run=polled, kind="repeat", status="scheduled")

    found = {wait.run: wait for wait in workflows.pending_waits()}
    poll, callback = found[polled.pk], found[bank.pk]
    assert (poll.kind, poll.step, poll.waits_for) == ("poll", "wait", "next poll")
    assert (poll.due_at, poll.details) == (repeat.due_at, {"iteration": 2})
    assert (callback.kind, callback.waits_for) == ("callback", "callback")

    assert [wait.run for wait in workflows.pending_waits(kind="poll")] == [polled.pk]
    assert [wait.run for wait in workflows.pending_waits(kind="callback")] == [bank.pk]
    both = workflows.pending_waits(kind=["poll", "callback"])
    assert {wait.run for wait in both} == {polled.pk, bank.pk}
    assert [wait.run for wait in workflows.pending_waits(kind="gate")] == []
