"""Loops inside a run, the contract of issue #25 name by name: every public name called
with the keywords the contract writes, in one walk through a review cycle and a poll.
The behaviour behind each name is tested in depth beside it (test_loops, test_polling,
test_loop_definitions, test_loop_rerun, tests/queries/test_loop_explain,
tests/api/test_step_iterations, tests/admin/test_loop_run_page)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import workflows
from tests.support.runs import run_inline
from tests.support.users import staff
from workflows import DefinitionError, Gate, Loop, Task, Workflow
from workflows.models import Step, StepIteration
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = __name__
SEEN: list[dict[str, Any]] = []


def draft(ctx: Any) -> dict[str, Any]:
    earlier = ctx.steps["review"]
    SEEN.append(
        {
            "iteration": ctx.iteration,
            "feedback": (earlier.output or {}).get("feedback"),
            "reviews": len(earlier.iterations),
            "key": ctx.idempotency_key,
        }
    )
    return {"text": f"draft {ctx.iteration}"}


def asked_for_changes(ctx: Any) -> bool:
    return ctx.steps["review"].output["decision"] == "rejected"


def status_of_export(ctx: Any) -> dict[str, Any]:
    return {"ready": ctx.iteration >= 3}


class Review(Workflow):
    name = "loops_contract_review"
    draft = Task(f"{HERE}.draft")
    review = Gate(prompt="Publish {input[title]}?", on_reject="continue")
    revise = Loop(back_to="draft", while_=asked_for_changes, max_iterations=5, after=["review"])
    publish = Task(f"{HERE}.draft", after=["revise"])


class Export(Workflow):
    name = "loops_contract_export"
    wait_ready = Task(
        f"{HERE}.status_of_export",
        repeat_until=lambda ctx: ctx.steps["wait_ready"].output["ready"],
        every=timedelta(minutes=5),
        max_iterations=4,
    )


def waiting_review(run: Any) -> Step:
    return Step.objects.get(run=run, name="review", status="waiting")


def test_a_review_goes_round_twice_then_publishes_with_every_round_kept(client):
    SEEN.clear()
    reviewer = staff("reviewer")
    run = workflows.start_run(Review, {"title": "Policy"})
    run_pending()
    workflows.reject_gate(waiting_review(run), user=reviewer, feedback="too long")
    run_pending()
    workflows.reject_gate(waiting_review(run), user=reviewer, feedback="too short")
    run_pending()
    workflows.approve_gate(waiting_review(run), user=reviewer)
    run_pending()

    run.refresh_from_db()
    assert run.status == "completed", run.error
    drafts = SEEN[:3]
    assert [seen["iteration"] for seen in drafts] == [1, 2, 3]
    assert [seen["feedback"] for seen in drafts] == [None, "too long", "too short"]
    assert [seen["reviews"] for seen in drafts] == [0, 1, 2]
    assert len({seen["key"] for seen in drafts}) == 3
    steps = {step.name: step for step in Step.objects.filter(run=run)}
    assert (steps["draft"].iteration, steps["review"].iteration) == (3, 3)
    assert steps["revise"].output == {"iterations": 3, "exhausted": False}
    decisions = StepIteration.objects.filter(step=steps["review"]).order_by("iteration")
    assert [(i.iteration, i.decision, i.feedback) for i in decisions] == [
        (1, "rejected", "too long"),
        (2, "rejected", "too short"),
    ]
    [loop] = workflows.explain(run).loops
    assert (loop["loop"], loop["back_to"], loop["iteration"]) == ("revise", "draft", 3)

    client.force_login(staff("viewer", "view_run"))
    listed = client.get(f"/api/runs/{run.pk}/steps/review/iterations/")
    assert listed.status_code == 200, listed.content
    assert [row["iteration"] for row in listed.json()["results"]] == [1, 2, 3]
    api_steps = client.get(f"/api/runs/{run.pk}/").json()["steps"]
    assert {step["name"]: step["iteration"] for step in api_steps}["review"] == 3

    # rerun_from a step inside the body starts a new iteration of it; the old one stays.
    workflows.rerun_from(run, "review")
    assert Step.objects.get(run=run, name="review").iteration == 4
    assert StepIteration.objects.filter(step=steps["review"]).count() == 3


def test_a_poll_sleeps_on_a_timer_between_iterations_until_done():
    run = run_inline(Export, until=timezone.now() + timedelta(minutes=16))
    assert run.status == "completed", run.error
    step = Step.objects.get(run=run)
    assert (step.iteration, step.output) == (3, {"ready": True})
    assert [row.output for row in StepIteration.objects.filter(step=step)] == [
        {"ready": False},
        {"ready": False},
    ]


class Stubborn(Workflow):
    name = "loops_contract_stubborn"
    work = Task(f"{HERE}.status_of_export")
    again = Loop(back_to="work", while_=lambda ctx: True, max_iterations=2, on_exhausted="fail")


def test_a_loop_that_runs_out_fails_the_run_with_max_iterations_exceeded():
    run = run_inline(Stubborn)
    assert (run.status, run.error["code"], run.error["iterations"]) == (
        "failed",
        "max_iterations_exceeded",
        2,
    )


def test_a_back_to_that_is_no_step_is_refused_when_the_class_is_created():
    with pytest.raises(DefinitionError, match="step 'again': back_to 'nowhere' is not a step"):

        class Lost(Workflow, register=False):
            name = "loops_contract_lost"
            work = Task(f"{HERE}.status_of_export")
            again = Loop(back_to="nowhere", while_=lambda ctx: True, max_iterations=2)
