"""Replay of any ended run: ``retry_run`` and ``rerun_from`` take every ended status, do
again only what is safe to do again, and say why not where it is not (in the verb's
error and in ``explain``'s ``allowed_actions``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support.handlers import BROKEN, CALLS, UNDONE
from tests.support.runs import claimed
from workflows import InvalidTransition, PermanentError, Task, WaitForSignal, Workflow
from workflows.definitions.graph import Graph
from workflows.engine import complete_work
from workflows.engine.replay import StepFacts, retry_plan
from workflows.models import CompensationRecord, Run, Step
from workflows.queries.explain import QUERIES, REPLAY_QUERIES
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.verbs.test_replay"


def work(ctx: Any) -> str:
    """Note the idempotency key it ran with; fail for good when the step is in BROKEN."""
    CALLS.append(ctx.idempotency_key.split("/", 1)[1])
    if ctx.step_name in BROKEN:
        raise PermanentError(f"{ctx.step_name} is broken")
    return ctx.step_name


def undo(ctx: Any) -> None:
    if f"undo:{ctx.step_name}" in BROKEN:
        raise PermanentError(f"cannot undo {ctx.step_name}")
    UNDONE.append(ctx.step_name)


class Trip(Workflow):
    """Two compensable steps, then one that may fail, then a wait."""

    name = "replay_trip"
    book = Task(f"{HERE}.work", compensate=f"{HERE}.undo")
    pay = Task(f"{HERE}.work", compensate=f"{HERE}.undo")
    confirm = Task(f"{HERE}.work")
    wait = WaitForSignal("go")


class Plain(Workflow):
    name = "replay_plain"
    only = Task(f"{HERE}.work")


def refreshed(run: Run) -> Run:
    run.refresh_from_db()
    return run


def later(delta: timedelta = timedelta(days=1)) -> Any:
    return timezone.now() + delta


def statuses(run: Run) -> dict[str, str]:
    return dict(Step.objects.filter(run=run).values_list("name", "status"))


def generations(run: Run) -> dict[str, int]:
    return dict(Step.objects.filter(run=run).values_list("name", "generation"))


def refusal(run: Run, verb: str, step: str | None = None) -> str | None:
    """What explain says of ``verb`` (on ``step``): ``None`` when allowed or not listed."""
    for action in workflows.explain(run).allowed_actions:
        if action.verb == verb and action.step == step:
            return action.reason
    return None


# One run of every ended status, as it comes to be.


def failed() -> Run:
    BROKEN.add("confirm")
    run = workflows.start_run(Trip)
    run_pending()
    BROKEN.discard("confirm")
    return run


def compensated() -> Run:
    return failed()


def cancelled() -> Run:
    run = workflows.start_run(Trip)
    run_pending()
    workflows.cancel_run(run)
    run_pending()
    return run


def cancelled_without_compensation() -> Run:
    run = workflows.start_run(Trip)
    run_pending()
    workflows.cancel_run(run, compensate=False)
    run_pending()
    return run


def terminated() -> Run:
    run = workflows.start_run(Trip)
    complete_work(claimed(run, "book", "w"), "book")
    claimed(run, "pay", "w")  # cut short by the terminate
    workflows.terminate_run(run)
    return run


def compensation_failed() -> Run:
    BROKEN.update({"confirm", "undo:pay"})
    run = workflows.start_run(Trip)
    run_pending(until=later())
    BROKEN.clear()
    return run


def completed() -> Run:
    run = workflows.start_run(Trip)
    run_pending()
    workflows.send_signal(run, "go")
    run_pending()
    return run


ENDED = {
    "compensated": compensated,
    "cancelled": cancelled,
    "cancelled_without_compensation": cancelled_without_compensation,
    "terminated": terminated,
    "compensation_failed": compensation_failed,
    "completed": completed,
}


@pytest.mark.parametrize("how", ENDED)
def test_every_ended_run_either_replays_or_says_why_not(how: str):
    run = ENDED[how]()
    status = refreshed(run).status
    assert status == how.removesuffix("_without_compensation")
    before = generations(run)
    reason = refusal(run, "retry")
    if how == "completed":
        assert reason == "run is completed; retry needs cancelled, compensated, " + (
            "compensation_failed, failed, terminated"
        )
        with pytest.raises(InvalidTransition, match="run is completed; retry needs"):
            workflows.retry_run(run)
        # A completed run is rerun, from a step whose work may be done again.
        assert refusal(run, "rerun", "book") == (
            "step 'book' completed work whose compensation never ran; rerunning it would "
            "do that work twice"
        )
        workflows.rerun_from(run, "confirm")
        assert generations(run) == {"book": 0, "pay": 0, "confirm": 1, "wait": 1}
        assert refreshed(run).status in {"running", "waiting"}
        return
    assert reason is None
    workflows.retry_run(run)
    run = refreshed(run)
    if how == "compensation_failed":
        assert run.status == "compensating"  # its failed compensation runs again
        run_pending()
        assert refreshed(run).status == "compensated"
        return
    assert run.status in {"running", "waiting"} and run.error is None
    run_pending()
    run = refreshed(run)
    assert run.status == "waiting"  # for its signal again: the replay reached the end
    redone = {name for name, generation in generations(run).items() if generation > before[name]}
    undone_before = {"compensated": {"book", "pay"}, "cancelled": {"book", "pay"}}
    # Compensated work and everything after it starts a new generation: new keys.
    expected = {"book", "pay", "confirm", "wait"} if how in undone_before else set()
    assert redone == expected


def test_retry_of_a_compensated_run_redoes_the_undone_work_with_new_keys():
    run = compensated()
    assert refreshed(run).status == "compensated"
    assert UNDONE == ["pay", "book"]
    CALLS.clear()
    workflows.retry_run(run)
    run_pending()
    assert CALLS == ["book#1", "pay#1", "confirm#1"]
    requested = refreshed(run).events.get(type="run.retry_requested")
    assert requested.payload["status"] == "compensated"
    assert requested.payload["redo"] == ["book", "pay", "confirm", "wait"]
    # The old records stay, undone; the new work wrote records of its own generation.
    records = CompensationRecord.objects.filter(run=run).order_by("sequence")
    assert [(r.step.name, r.status, r.payload["generation"]) for r in records] == [
        ("book", "completed", 0),
        ("pay", "completed", 0),
        ("book", "pending", 1),
        ("pay", "pending", 1),
    ]


def test_retry_of_a_terminated_run_finishes_the_cut_short_step_under_its_key():
    run = terminated()
    pay = Step.objects.get(run=run, name="pay")
    assert (pay.status, pay.attempt) == ("cancelled", 1)
    assert CompensationRecord.objects.get(run=run).status == "skipped"
    CALLS.clear()
    workflows.retry_run(run)
    run_pending()
    assert CALLS == ["pay", "confirm"]  # book's work stands: not done again
    pay.refresh_from_db()
    assert (pay.status, pay.attempt, pay.generation) == ("completed", 2, 0)
    assert pay.max_attempts > 1  # a fresh set of attempts
    # book's skipped compensation is armed again: a later failure undoes it with the rest.
    workflows.cancel_run(run)
    run_pending()
    assert UNDONE == ["pay", "book"]
    assert refreshed(run).status == "cancelled"


def test_retry_after_a_cancel_without_compensation_keeps_and_rearms_the_standing_work():
    run = cancelled_without_compensation()
    assert set(CompensationRecord.objects.values_list("status", flat=True)) == {"skipped"}
    CALLS.clear()
    workflows.retry_run(run)
    run_pending()
    assert CALLS == []  # book, pay and confirm had completed: only the wait reopened
    assert statuses(run)["wait"] == "waiting"
    assert set(CompensationRecord.objects.values_list("status", flat=True)) == {"pending"}
    assert (
        refreshed(run).events.get(type="run.retry_requested").payload["compensations_rearmed"] == 2
    )


def test_a_rerun_refuses_to_redo_work_whose_compensation_never_ran():
    run = terminated()
    reason = (
        "step 'book' completed work whose compensation never ran; rerunning it would do "
        "that work twice"
    )
    assert refusal(run, "rerun", "book") == reason
    assert refusal(run, "rerun", "pay") is None  # pay never completed: it may run again
    with pytest.raises(InvalidTransition, match=reason) as refused:
        workflows.rerun_from(run, "book")
    assert refused.value.details["uncompensated"] == ["book"]
    assert refreshed(run).status == "terminated"
    workflows.rerun_from(run, "pay")
    run_pending()
    assert statuses(run) == {
        "book": "completed",
        "pay": "completed",
        "confirm": "completed",
        "wait": "waiting",
    }
    assert generations(run) == {"book": 0, "pay": 1, "confirm": 1, "wait": 1}


def test_a_rerun_of_a_compensated_run_must_redo_every_undone_step():
    run = compensated()
    reason = (
        "step 'book' was compensated (its work undone) and is not downstream of 'pay', so "
        "the rerun would build on undone work; rerun from 'book' or an earlier step, or "
        "retry the run"
    )
    assert refusal(run, "rerun", "pay") == reason
    with pytest.raises(InvalidTransition, match=r"step 'book' was compensated"):
        workflows.rerun_from(run, "pay")
    assert refusal(run, "rerun", "book") is None
    workflows.rerun_from(run, "book")
    run_pending()
    assert refreshed(run).status == "waiting"


def test_a_failed_compensation_is_finished_before_any_rerun():
    run = compensation_failed()
    assert refreshed(run).status == "compensation_failed"
    reason = (
        "the compensation of step 'pay' failed: its work is neither standing nor undone; "
        "retry the run to run the compensation again first"
    )
    assert refusal(run, "rerun", "book") == reason
    with pytest.raises(InvalidTransition, match="the compensation of step 'pay' failed"):
        workflows.rerun_from(run, "book")
    with pytest.raises(workflows.InvalidInput, match="no deadline stops"):
        workflows.retry_run(run, deadline=timedelta(hours=1))
    workflows.retry_run(run)
    run_pending()
    assert refreshed(run).status == "compensated"
    assert refusal(run, "rerun", "book") is None


def test_a_retry_that_would_redo_work_whose_compensation_never_ran_is_refused():
    """Undone work with standing, uncompensated work after it: rare (compensation runs
    latest first), so the state is set by hand, as a terminate in the middle of an
    unwinding whose order an operator changed would leave it."""
    run = terminated()
    workflows.rerun_from(run, "pay")
    run_pending()
    workflows.cancel_run(run, compensate=False)
    run_pending()
    # book's work was undone, pay's (after it) still stands with its compensation skipped.
    CompensationRecord.objects.filter(run=run, step__name="book").update(status="completed")
    reason = (
        "step 'pay' completed work whose compensation never ran, and it depends on 'book', "
        "whose work was compensated: a retry would do 'book' again and then 'pay''s work "
        "twice; start a new run instead"
    )
    assert refusal(run, "retry") == reason
    with pytest.raises(InvalidTransition, match="start a new run instead"):
        workflows.retry_run(run)
    assert refreshed(run).status == "cancelled"


def test_the_retry_plan_is_a_function_of_the_steps_facts():
    graph = Trip.graph
    standing = StepFacts("completed", frozenset({"pending"}))
    undone = StepFacts("completed", frozenset({"completed"}))
    plain = StepFacts("completed")
    plan = retry_plan(
        graph,
        {"book": standing, "pay": undone, "confirm": plain, "wait": StepFacts("cancelled")},
        {"book": 1, "pay": 1, "confirm": 1, "wait": 0},
    )
    assert (plan.redo, plan.retry, plan.refusal) == (("pay", "confirm", "wait"), (), None)
    cut = retry_plan(
        graph,
        {
            "book": plain,
            "pay": StepFacts("cancelled"),
            "confirm": StepFacts("failed"),
            "wait": StepFacts("cancelled"),
        },
        {"book": 1, "pay": 2, "confirm": 1, "wait": 0},
    )
    assert (cut.redo, cut.retry) == ((), ("pay", "confirm"))
    assert isinstance(graph, Graph)


def test_explaining_an_ended_run_costs_one_query_more_only_with_compensations():
    def cost(run: Run) -> int:
        with CaptureQueriesContext(connection) as captured:
            workflows.explain(run)
        skipped = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")
        return len([q for q in captured.captured_queries if not q["sql"].startswith(skipped)])

    plain = workflows.start_run(Plain)
    run_pending()
    assert refreshed(plain).status == "completed"
    assert cost(plain) == QUERIES
    assert cost(compensated()) == QUERIES + REPLAY_QUERIES
    assert cost(workflows.start_run(Trip)) == QUERIES  # not ended: no replay to judge
