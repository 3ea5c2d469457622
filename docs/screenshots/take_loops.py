"""Take the loop screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_loops.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): a
review loop in its third round (its review rejected twice, each time with feedback),
photographed as its run page shows it (the loop's back edge beneath the graph, each
step's round, where each loop stands), its steps table with the earlier iterations
expanded, the approvals inbox and the decision page naming the round the review waits
in with the earlier rounds' feedback, and a polling task between two polls on the Waits
page; and a loop that ran out of its 25 rounds (the run failed with
max_iterations_exceeded), its check's 24 earlier iterations expanded.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402


def build_demo() -> dict:
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import override_settings

    import workflows
    from tests.support.loop_review import ExportPoll, rejected
    from workflows import Gate, Loop, Task, Workflow
    from workflows.testing import run_pending

    call_command("migrate", verbosity=0)
    operator = User.objects.create_superuser("operator", password=PASSWORD)
    editor = User.objects.create_user("editor")

    class ArticleReview(Workflow):
        name = "article_review"
        draft = Task("tests.support.loop_review.draft")
        review = Gate(prompt="Publish {steps[draft][text]}?", on_reject="continue")
        revise = Loop(back_to="draft", while_=rejected, max_iterations=5)
        publish = Task("tests.support.loop_review.draft")

    class Stubborn(Workflow):
        """A check that never passes: its loop runs out after 25 rounds."""

        name = "article_check"
        draft = Task("tests.support.loop_review.draft")
        check = Task("tests.support.loop_review.check_export")
        recheck = Loop(
            back_to="draft",
            while_=lambda ctx: not ctx.steps["check"].output["ready"],
            max_iterations=25,
        )

    feedback = ["The intro is too long; cut it to two sentences.", "Cite the 2025 figures."]
    with override_settings(WORKFLOWS={"EXECUTOR": "inline"}):
        run = workflows.start_run(ArticleReview, {"slug": "loops"}, business_key="article-42")
        for deciders, note in zip((editor, operator), feedback, strict=True):
            run_pending()
            gate = run.steps.get(name="review")
            workflows.reject_gate(gate, user=deciders, feedback=note)
        run_pending()
        workflows.start_run(ExportPoll, {}, business_key="export-7")
        run_pending()
        stubborn = workflows.start_run(Stubborn, {"slug": "never"}, business_key="article-43")
        run_pending()
    return {
        "run": str(run.pk),
        "gate": run.steps.get(name="review").pk,
        "exhausted": str(stubborn.pk),
    }


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        page = camera.page
        page.goto(f"/admin/workflows/run/{ids['run']}/change/")
        camera.photo("run-page-loop")
        row = page.locator("#step-review")
        row.locator("details.wf-iterations summary").click()
        page.locator("#step-draft details.wf-iterations summary").click()
        page.evaluate("window.scrollTo(0, 0)")
        camera.photo("run-page-loop-iterations", clip=page.locator("#steps").bounding_box())
        page.goto("/admin/")
        page.get_by_role("link", name="Approvals inbox").click()
        camera.photo("approvals-inbox-loop")
        page.get_by_role("link", name=f"Decide gate {ids['gate']}").click()
        camera.photo("approval-decision-loop")
        page.goto("/admin/workflows/run/waits/")
        camera.photo("waits-poll")
        page.goto(f"/admin/workflows/run/{ids['exhausted']}/change/")
        page.locator("#step-check details.wf-iterations summary").click()
        camera.photo("run-page-loop-exhausted")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
