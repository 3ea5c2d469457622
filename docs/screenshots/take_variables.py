"""Take the run variables screenshot in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_variables.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): a
quote started with its first variables, whose two steps each wrote some (one of them
changing a variable the start set), waiting at its approval; its run page shows the
Variables section with each variable, its value and the step that last wrote it.
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

    import workflows
    from workflows import Gate, Task, Workflow
    from workflows.engine import claim_step, complete_work
    from workflows.models import Step

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)
    work = "flowsite.demo.steps.reserve_stock"

    class Quote(Workflow):
        """Price a quote, check the customer's credit, then ask for approval."""

        name = "quote_approval"
        price = Task(work)
        check_credit = Task(work)
        approve = Gate(prompt="Send the quote?")

    run = workflows.start_run(
        Quote,
        {"order_id": "Q-2291", "lines": [{"sku": "DESK-3", "quantity": 4}]},
        business_key="Q-2291",
        variables={"region": "eu", "currency": "EUR", "customer": {"tier": "gold"}},
    )
    writes = {
        "price": [
            {"tax_rate": 0.2, "quote": {"net": 1200, "gross": 1440, "lines": [4]}},
            {"currency": "EUR", "discount": 5},
        ],
        "check_credit": [{"customer": {"credit_ok": True, "limit": 5000}}],
    }
    for name, patches in writes.items():  # as a worker runs each step's handler
        lease = claim_step(Step.objects.get(run=run, name=name).pk, "worker-1")
        lease.variable_patches.extend(patches)
        complete_work(lease, {"ok": True})
    return {"run": str(run.pk)}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        page = camera.page
        page.goto(f"/admin/workflows/run/{ids['run']}/change/")
        section = page.locator("section", has=page.locator("#run-variables-title"))
        section.scroll_into_view_if_needed()
        camera.photo("run-variables")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
