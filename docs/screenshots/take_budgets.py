"""Take the usage budgets screenshot in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_budgets.py

Like ``take.py`` (whose database setup and server it reuses): a workflow with a daily
token budget, a token budget per customer and a money budget that fails (lowered at run
time by an operator), runs of four customers that reported usage (two of them over
their budget, with steps held, and one breach each), usage an operator reported, the
budgets page as an operator sees it, and its form to create a budget.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

CUSTOMERS = {"acme": 51_300, "globex": 41_250, "initech": 12_810, "umbrella": 50_010}


def build_demo() -> dict:
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import override_settings

    import workflows
    from workflows import Task, Workflow
    from workflows.definitions import Budget
    from workflows.engine.limits.budgets import record_usage
    from workflows.models import Step

    call_command("migrate", verbosity=0)
    operator = User.objects.create_superuser("operator", password=PASSWORD)

    class Summarise(Workflow):
        name = "summarise_documents"
        budgets = [
            Budget("tokens", 2_000_000, period=timedelta(days=1)),
            Budget("tokens", 50_000, per="business_key"),
            Budget("dollars", 500, on_exhausted="fail"),
        ]
        summarise = Task("flowsite.demo.steps.reserve_stock")

    with override_settings(WORKFLOWS={"EXECUTOR": "inline"}):
        workflows.create_budget(Summarise, "dollars", limit=150, on_exhausted="fail", user=operator)
        for customer, tokens in CUSTOMERS.items():
            for document in range(3):
                run = workflows.start_run(Summarise, {"doc": document}, business_key=customer)
                record_usage(run.pk, None, 1, Summarise, "tokens", tokens // 3)
                record_usage(run.pk, None, 1, Summarise, "dollars", tokens // 3 * 3 / 1000)
                if tokens >= 50_000:
                    Step.objects.filter(run=run, status="ready").update(held_on="budget:tokens")
        workflows.report_usage(Summarise, "tokens", 4_000, scope_key="initech", user=operator)
    return {}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        camera.page.goto("/admin/workflows/budgetcounter/")
        camera.photo("budgets")
        camera.page.get_by_role("link", name="Raise", exact=True).nth(2).click()
        camera.page.wait_for_load_state()
        camera.photo("budget-raise")
        camera.page.goto("/admin/workflows/budgetcounter/")
        camera.page.get_by_role("link", name="Create a budget").click()
        camera.page.wait_for_load_state()
        camera.photo("budget-create")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
