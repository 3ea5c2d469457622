"""Take the run tags screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_tags.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): invoices
and refunds of four customers in two regions, some done, some running, some waiting at
their approval, a few with a tag a step set (``tier``) and one child run inheriting its
parent's tags. Two pages: the runs list filtered by the tag ``customer:acme`` (the tag
key and tag filters open, the tags as chips in the rows), and the page of a run with
its tags under its head.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

CUSTOMERS = ("acme", "globex", "initech", "umbrella")


def build_demo() -> dict:
    from django.contrib.auth.models import User
    from django.core.management import call_command

    import workflows
    from workflows import Gate, SubWorkflow, Task, Workflow
    from workflows.engine import claim_step, complete_work
    from workflows.models import Step

    call_command("migrate", verbosity=0)
    operator = User.objects.create_superuser("operator", password=PASSWORD)
    work = "flowsite.demo.steps.reserve_stock"

    class Notify(Workflow):
        """Tell the customer."""

        name = "notice"
        send = Task(work)

    class Invoice(Workflow):
        """Issue an invoice, check the customer's credit, ask for approval, notify."""

        name = "invoice"
        issue = Task(work)
        check_credit = Task(work)
        approve = Gate(prompt="Send the invoice?")
        notify = SubWorkflow("notice", after="approve")

    class Refund(Workflow):
        """Refund a payment."""

        name = "refund"
        refund = Task(work)

    def finish(run, name, tags=None):  # as a worker runs the step's handler
        lease = claim_step(Step.objects.get(run=run, name=name).pk, "worker-1")
        if tags:
            lease.tag_patches.append(tags)
        complete_work(lease, {"ok": True})

    shown = None
    for n in range(18):
        customer = CUSTOMERS[n % len(CUSTOMERS)]
        region = ("eu", "us")[n % 3 == 0]
        tags = {"customer": customer, "region": region}
        if n % 4 == 1:
            tags["channel"] = "partner"
        if n % 5 == 4:
            run = workflows.start_run(
                Refund, {}, business_key=f"RF-{700 + n}", title=f"Refund RF-{700 + n}", tags=tags
            )
            finish(run, "refund")
            continue
        run = workflows.start_run(
            Invoice,
            {},
            business_key=f"INV-{2280 + n}",
            title=f"Invoice INV-{2280 + n}",
            tags={**tags, "plan": ("pro", "team", "free")[n % 3]},
        )
        if n % 3 != 2:
            finish(run, "issue")
            finish(run, "check_credit", {"tier": ("gold", "review")[n % 2]})
        if n % 6 == 0:  # approved: its notice is a child run, with its tags
            workflows.approve_gate(Step.objects.get(run=run, name="approve"), user=operator)
        if customer == "acme" and n % 3 != 2 and shown is None:
            shown = run
    assert shown is not None
    return {"run": str(shown.pk)}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        page = camera.page
        page.goto("/admin/workflows/run/")
        page.get_by_role("link", name="customer", exact=True).click()
        page.wait_for_load_state()
        page.locator("#changelist-filter").get_by_role("link", name="acme", exact=True).click()
        page.wait_for_load_state()
        camera.photo("runs-list-tags")
        page.goto(f"/admin/workflows/run/{ids['run']}/change/")
        page.wait_for_load_state()
        camera.photo("run-tags", clip={"x": 0, "y": 0, "width": 1400, "height": 900})
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
