"""Loop nodes: a review cycle going round until approved, exhaustion both ways, a
compensation of every completed iteration newest first, conditions and fan-outs inside a
body, nested loops, and a run cancelled mid-iteration."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.engine.sql.test_query_budget import (
    CHAINED_STEP_QUERIES,
    UNCHAINED_STEP_QUERIES,
    statements,
)
from tests.support.handlers import CALLS, NOOP
from tests.support.loop_review import rejected
from tests.support.runs import claimed, run_inline
from workflows import FanOut, Gate, Loop, PermanentError, Retry, Task, Workflow
from workflows.engine import claim_step, complete_work
from workflows.engine.lease import Lease
from workflows.models import CompensationRecord, Event, FanOutItem, Run, Step, StepIteration, Timer
from workflows.testing import run_pending
from workflows.workers.scanners import reclaim_expired_leases

pytestmark = pytest.mark.django_db

HERE = "tests.engine.loops.test_loops"
# What ``draft`` saw of each round: (iteration, idempotency key, the previous review).
DRAFTS: list[tuple[int, str, object]] = []
# What ``undo`` compensated: ("<step> <iteration>", compensated output, idempotency key),
# in order.
UNDONE: list[tuple[str, object, str]] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    DRAFTS.clear()
    UNDONE.clear()


def draft(ctx):
    review = ctx.steps["review"]
    DRAFTS.append((ctx.iteration, ctx.idempotency_key, review.output))
    return {"text": f"draft {ctx.iteration}"}


def publish(ctx):
    return {"published": ctx.steps["draft"].output["text"], "review": ctx.steps["review"].output}


class Review(Workflow):
    name = "loop_review"
    draft = Task(f"{HERE}.draft")
    review = Gate(prompt="Publish {steps[draft][text]}?", on_reject="continue")
    again = Loop(back_to="draft", while_=rejected, max_iterations=5)
    publish = Task(f"{HERE}.publish")


@pytest.fixture
def reviewer() -> User:
    return User.objects.create_user("reviewer")


def waiting_review(run: Run) -> Step:
    run_pending()
    gate = Step.objects.get(run=run, name="review")
    assert gate.status == "waiting"
    return gate


def test_approved_on_the_first_round_the_loop_completes_without_iterations(reviewer):
    run = workflows.start_run(Review)
    workflows.approve_gate(waiting_review(run), user=reviewer)
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    loop = Step.objects.get(run=run, name="again")
    assert loop.output == {"iterations": 1, "exhausted": False}
    assert not StepIteration.objects.filter(run=run).exists()
    assert not Event.objects.filter(run=run, type="loop.iterated").exists()
    assert [seen[0] for seen in DRAFTS] == [1]


def test_rejected_twice_then_approved_keeps_every_round(reviewer):
    run = workflows.start_run(Review)
    workflows.reject_gate(waiting_review(run), user=reviewer, feedback="too long")
    workflows.reject_gate(waiting_review(run), user=reviewer, feedback="too short")
    workflows.approve_gate(waiting_review(run), user=reviewer, feedback="fine")
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"

    steps = {step.name: step for step in Step.objects.filter(run=run)}
    assert steps["draft"].iteration == steps["review"].iteration == 3
    assert steps["again"].output == {"iterations": 3, "exhausted": False}
    archived = StepIteration.objects.filter(step=steps["review"]).order_by("iteration")
    assert [(row.iteration, row.decision, row.feedback) for row in archived] == [
        (1, "rejected", "too long"),
        (2, "rejected", "too short"),
    ]
    assert {row.decided_by for row in archived} == {reviewer}
    assert [row.iteration for row in StepIteration.objects.filter(step=steps["draft"])] == [1, 2]
    assert steps["publish"].output["published"] == "draft 3"
    assert steps["publish"].output["review"]["decision"] == "approved"

    # The draft of each round saw its iteration and the review of the round before.
    assert [(seen[0], seen[2] and seen[2]["feedback"]) for seen in DRAFTS] == [
        (1, None),
        (2, "too long"),
        (3, "too short"),
    ]
    keys = [seen[1] for seen in DRAFTS]
    assert len(set(keys)) == 3
    iterated = Event.objects.filter(run=run, type="loop.iterated").order_by("id")
    assert [event.payload["iteration"] for event in iterated] == [2, 3]
    assert iterated[0].payload["back_to"] == "draft"
    assert iterated[0].payload["body"] == ["draft", "review"]


def always(ctx) -> bool:
    return True


def noted(ctx):
    CALLS.append(ctx.step_name)
    return ctx.iteration


class FailsWhenExhausted(Workflow):
    name = "loop_exhausted_fail"
    attempt = Task(f"{HERE}.noted")
    again = Loop(back_to="attempt", while_=always, max_iterations=3)
    after = Task(f"{HERE}.noted")


class ContinuesWhenExhausted(Workflow):
    name = "loop_exhausted_continue"
    attempt = Task(f"{HERE}.noted")
    again = Loop(back_to="attempt", while_=always, max_iterations=3, on_exhausted="continue")
    after = Task(f"{HERE}.noted")


def test_an_exhausted_loop_fails_the_run_and_nothing_after_it_runs():
    run = run_inline(FailsWhenExhausted)
    assert run.status == "failed"
    assert run.error["code"] == "max_iterations_exceeded"
    assert run.error["step"] == "again"
    assert run.error["iterations"] == 3
    assert CALLS == ["attempt"] * 3
    assert Step.objects.get(run=run, name="after").status == "cancelled"
    assert Step.objects.get(run=run, name="again").status == "failed"
    assert Event.objects.filter(run=run, type="loop.exhausted").count() == 1


def test_an_exhausted_loop_that_continues_goes_on():
    run = run_inline(ContinuesWhenExhausted)
    assert run.status == "completed"
    assert Step.objects.get(run=run, name="again").output == {"iterations": 3, "exhausted": True}
    assert CALLS == ["attempt"] * 3 + ["after"]
    assert Step.objects.get(run=run, name="after").output == 1


def book(ctx):
    return f"booking {ctx.iteration}"


def undo(ctx):
    UNDONE.append((f"{ctx.step_name} {ctx.iteration}", ctx.compensated_output, ctx.idempotency_key))


def fewer_than_three(ctx) -> bool:
    return ctx.steps["book"].output != "booking 3"


def refuse(ctx):
    raise PermanentError("payment refused")


class Rebooked(Workflow):
    name = "loop_compensated"
    book = Task(f"{HERE}.book", compensate=f"{HERE}.undo")
    again = Loop(back_to="book", while_=fewer_than_three, max_iterations=5)
    pay = Task(f"{HERE}.refuse", retry=Retry(max_attempts=1))


def test_every_completed_iteration_is_compensated_newest_first_once():
    run = run_inline(Rebooked)
    assert run.status == "compensated"
    assert [(step, output) for step, output, _ in UNDONE] == [
        ("book 3", "booking 3"),
        ("book 2", "booking 2"),
        ("book 1", "booking 1"),
    ]
    assert len({key for _, _, key in UNDONE}) == 3
    records = CompensationRecord.objects.filter(run=run)
    assert records.count() == 3
    assert {record.status for record in records} == {"completed"}
    run_pending()
    assert len(UNDONE) == 3


def rejected_check(ctx) -> bool:
    return ctx.steps["check"].output["decision"] == "rejected"


class CancelledInLoop(Workflow):
    name = "loop_cancelled_midway"
    book = Task(f"{HERE}.book", compensate=f"{HERE}.undo")
    check = Gate(prompt="good?", on_reject="continue")
    again = Loop(back_to="book", while_=rejected_check, max_iterations=5)


def test_a_run_cancelled_mid_iteration_compensates_every_completed_iteration(reviewer):
    run = workflows.start_run(CancelledInLoop)
    for _ in range(2):
        run_pending()
        workflows.reject_gate(Step.objects.get(run=run, name="check"), user=reviewer)
    run_pending()
    assert Step.objects.get(run=run, name="check").iteration == 3
    workflows.cancel_run(run, reason="changed plans")
    run_pending()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert [output for _, output, _ in UNDONE] == ["booking 3", "booking 2", "booking 1"]


def round_items(ctx):
    return [f"{ctx.steps['start'].output}-{n}" for n in range(2)]


def item_seen(ctx):
    CALLS.append(f"{ctx.item} {ctx.idempotency_key}")
    return ctx.item


def round_of(ctx):
    return ctx.iteration


def before_two(ctx) -> bool:
    return ctx.iteration < 2


class Conditional(Workflow):
    name = "loop_conditional"
    start = Task(f"{HERE}.round_of")
    extra = Task(f"{HERE}.noted", when=lambda ctx: ctx.steps["start"].output == 2)
    spread = FanOut(f"{HERE}.item_seen", items=round_items, after="start")
    again = Loop(back_to="start", while_=before_two, max_iterations=3, after=["extra", "spread"])


def test_a_condition_and_a_fan_out_inside_a_body_are_evaluated_per_round():
    run = run_inline(Conditional)
    assert run.status == "completed"
    extra = Step.objects.get(run=run, name="extra")
    assert extra.status == "completed" and extra.iteration == 2
    assert StepIteration.objects.get(step=extra).status == "skipped"
    items = [call.split(" ") for call in CALLS if call.startswith(("1-", "2-"))]
    assert sorted(item for item, _ in items) == ["1-0", "1-1", "2-0", "2-1"]
    assert sorted(key.removeprefix(f"{run.pk}/") for _, key in items) == [
        "spread#1@2/0",
        "spread#1@2/1",
        "spread/0",
        "spread/1",
    ]
    spread = Step.objects.get(run=run, name="spread")
    assert sorted(FanOutItem.objects.filter(step=spread).values_list("output", flat=True)) == [
        "2-0",
        "2-1",
    ]


def inner_rounds(ctx) -> bool:
    return ctx.iteration < 2


def outer_rounds(ctx) -> bool:
    return ctx.iteration < 3


def rounds_seen(ctx):
    CALLS.append(f"{ctx.step_name} {ctx.iteration}")
    return ctx.iteration


class Nested(Workflow):
    name = "loop_nested"
    prepare = Task(f"{HERE}.rounds_seen")
    edit = Task(f"{HERE}.rounds_seen")
    inner = Loop(back_to="edit", while_=inner_rounds, max_iterations=2)
    outer = Loop(back_to="prepare", while_=outer_rounds, max_iterations=3)
    done = Task(f"{HERE}.rounds_seen")


def test_a_nested_loop_counts_its_rounds_afresh_in_each_outer_round():
    run = run_inline(Nested)
    assert run.status == "completed"
    assert CALLS == [
        "prepare 1",
        "edit 1",
        "edit 2",
        "prepare 2",
        "edit 3",
        "edit 4",
        "prepare 3",
        "edit 5",
        "edit 6",
        "done 1",
    ]
    steps = {step.name: step for step in Step.objects.filter(run=run)}
    assert steps["inner"].output == {"iterations": 2, "exhausted": False}
    assert steps["outer"].output == {"iterations": 3, "exhausted": False}
    assert StepIteration.objects.filter(step=steps["edit"]).count() == 5
    assert not StepIteration.objects.filter(step=steps["inner"]).exists()
    assert StepIteration.objects.filter(step=steps["prepare"]).count() == 2


def first_round(ctx) -> bool:
    return ctx.iteration == 1


class Budgeted(Workflow):
    name = "loop_budget"
    draft = Task(NOOP)
    edit = Task(NOOP)
    check = Task(NOOP)
    again = Loop(back_to="draft", while_=first_round, max_iterations=2)
    publish = Task(NOOP)


def second_round_lease(run: Run) -> Lease:
    """The lease of ``draft`` in the second round, the first round done step by step."""
    for name in ("draft", "edit", "check"):
        complete_work(claimed(run, name, "w"), None)
    draft = Step.objects.get(run=run, name="draft")
    assert (draft.status, draft.iteration) == ("ready", 2)
    return claim_step(draft.pk, "w")


def test_a_step_in_its_second_round_costs_what_a_plain_step_costs():
    run = workflows.start_run(Budgeted)
    complete_work(second_round_lease(run), None)
    edit = Step.objects.get(run=run, name="edit")
    with CaptureQueriesContext(connection) as captured:
        complete_work(claim_step(edit.pk, "w"), None)
    assert Step.objects.get(run=run, name="check").status == "ready"
    assert len(statements(captured)) == UNCHAINED_STEP_QUERIES


def keyed(ctx):
    CALLS.append(f"{ctx.step_name} {ctx.iteration} {ctx.idempotency_key}")


class Reclaimed(Workflow):
    name = "loop_reclaimed"
    draft = Task(f"{HERE}.keyed")
    edit = Task(f"{HERE}.keyed")
    check = Task(f"{HERE}.keyed")
    again = Loop(back_to="draft", while_=first_round, max_iterations=2)


def test_a_lost_worker_in_the_second_round_reruns_only_its_step_under_the_same_key():
    run = workflows.start_run(Reclaimed)
    complete_work(second_round_lease(run), None)
    lost = claimed(run, "edit", "vanished")
    assert reclaim_expired_leases(now=timezone.now() + timedelta(days=1)).done == 1
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert [f"edit 2 {lost.idempotency_key}", f"check 2 {run.pk}/check#1@2"] == CALLS
    assert lost.idempotency_key == f"{run.pk}/edit#1@2"


def test_a_chained_step_in_its_second_round_costs_what_a_plain_one_costs():
    run = workflows.start_run(Budgeted)
    lease = complete_work(second_round_lease(run), None, claim_next=True)
    assert lease is not None and lease.step_name == "edit"
    with CaptureQueriesContext(connection) as captured:
        lease = complete_work(lease, None, claim_next=True)
    assert lease is not None and lease.step_name == "check"
    assert len(statements(captured)) == CHAINED_STEP_QUERIES


def unreadable(ctx) -> bool:
    raise ValueError("review unreadable")


class ConditionRaises(Workflow):
    name = "loop_condition_raises"
    draft = Task(NOOP)
    again = Loop(back_to="draft", while_=unreadable, max_iterations=3)
    publish = Task(NOOP)


def test_a_while_that_raises_fails_the_loop_with_condition_error():
    run = run_inline(ConditionRaises)
    assert run.status == "failed"
    loop = Step.objects.get(run=run, name="again")
    assert (loop.status, loop.error["code"]) == ("failed", "condition_error")
    assert "review unreadable" in loop.error["message"]
    assert Step.objects.get(run=run, name="publish").status == "cancelled"


class TimedReview(Workflow):
    name = "loop_timed_review"
    draft = Task(NOOP)
    review = Gate(
        prompt="ok?", timeout=timedelta(hours=1), on_timeout="reject", on_reject="continue"
    )
    again = Loop(back_to="draft", while_=rejected, max_iterations=3, on_exhausted="continue")


def test_a_gate_in_a_body_is_claimed_and_timed_afresh_each_round(reviewer):
    run = workflows.start_run(TimedReview)
    run_pending()
    workflows.claim_gate(Step.objects.get(run=run, name="review"), reviewer)
    for round_ in range(1, 4):
        gate = Step.objects.get(run=run, name="review")
        assert (gate.status, gate.iteration) == ("waiting", round_)
        timeout = Timer.objects.get(step=gate, status="scheduled")
        assert timeout.kind == "gate_timeout"
        # The next round's timeout is due an hour after this one fires, so later.
        run_pending(until=timeout.due_at)
        if round_ == 1:
            assert Step.objects.get(run=run, name="review").claimed_by is None
    run.refresh_from_db()
    assert run.status == "completed"
    archived = StepIteration.objects.filter(run=run, step__name="review")
    assert [(row.decision, row.decided_via) for row in archived] == [("rejected", "timeout")] * 2
    assert Timer.objects.filter(run=run, kind="gate_timeout", status="fired").count() == 3


def shipped(ctx):
    return f"{ctx.item} {ctx.iteration}"


def two_rounds(ctx) -> bool:
    return ctx.iteration < 2


class ShippedTwice(Workflow):
    name = "loop_fanout_compensated"
    ship = FanOut(f"{HERE}.shipped", items=lambda ctx: ["a", "b"], compensate=f"{HERE}.undo")
    again = Loop(back_to="ship", while_=two_rounds, max_iterations=3)
    pay = Task(f"{HERE}.refuse", retry=Retry(max_attempts=1))


def test_every_round_of_a_compensable_fan_out_is_compensated():
    run = run_inline(ShippedTwice)
    assert run.status == "compensated"
    assert sorted(output for _, output, _ in UNDONE) == ["a 1", "a 2", "b 1", "b 2"]
    assert len({key for _, _, key in UNDONE}) == 4
