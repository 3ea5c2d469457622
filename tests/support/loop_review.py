"""Loops the API, console and browser tests share: a review loop (a draft, a gate that
reviews it, and a loop back to the draft while the review rejects) and a polling task
(an export checked every five minutes until it is ready)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User

import workflows
from workflows import Gate, Loop, Task, Workflow
from workflows.models import Run, Step
from workflows.testing import run_pending

HERE = __name__


def draft(ctx: Any) -> dict[str, str]:
    return {"text": f"draft {ctx.iteration}"}


def rejected(ctx: Any) -> bool:
    return ctx.steps["review"].output["decision"] == "rejected"


class ReviewLoop(Workflow):
    name = "loop_review_pages"
    draft = Task(f"{HERE}.draft")
    review = Gate(prompt="Publish {steps[draft][text]}?", on_reject="continue")
    again = Loop(back_to="draft", while_=rejected, max_iterations=5)
    publish = Task(f"{HERE}.draft")


def check_export(ctx: Any) -> dict[str, bool]:
    return {"ready": False}


def export_ready(ctx: Any) -> bool:
    return bool(ctx.steps["check"].output["ready"])


class ExportPoll(Workflow):
    name = "loop_export_poll"
    check = Task(
        f"{HERE}.check_export",
        repeat_until=export_ready,
        every=timedelta(minutes=5),
        max_iterations=12,
    )


def review_in_round(rounds: int, reviewer: User) -> Run:
    """A run whose review was rejected ``rounds - 1`` times, each with feedback naming
    its round, now waiting for the review of round ``rounds``."""
    run = workflows.start_run(ReviewLoop)
    for round_number in range(1, rounds):
        run_pending()
        gate = Step.objects.get(run=run, name="review")
        workflows.reject_gate(gate, user=reviewer, feedback=f"not yet ({round_number})")
    run_pending()
    return run
