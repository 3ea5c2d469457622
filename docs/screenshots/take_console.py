"""Take the operator console's screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_console.py

Like ``take.py`` (whose database setup and server it reuses): demo runs in a temporary
SQLite database, photographed with the browser tests' Chromium. The runs list, a run
page mid-run (steps completed, a retry scheduled after an error, a gate waiting), a
run page of a failed and compensated run, a bulk cancel's dry-run page, and the
dashboard. Finished runs are spread over the last day so the chart has a shape.
"""

from __future__ import annotations

import random
import sys
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

DEMO = "flowsite.demo.steps"


def onboarding_workflow() -> type:
    """A workflow with parallel branches, a fan-out, a retried task and a gate: the
    graph the run page shows mid-run."""
    from workflows import FanOut, Gate, Option, Retry, Task, Workflow

    class SupplierOnboarding(Workflow):
        name = "supplier_onboarding"
        check_registry = Task(f"{DEMO}.reserve_stock")
        fetch_documents = Task(
            f"{DEMO}.import_batch",
            after=["check_registry"],
            retry=Retry(max_attempts=4, initial_interval=timedelta(minutes=5)),
        )
        score_risk = Task(f"{DEMO}.compute_tax", after=["check_registry"])
        verify_sites = FanOut(
            f"{DEMO}.pack_parcel",
            items=lambda ctx: ctx.input["parcels"],
            key=lambda parcel: parcel["id"],
            after=["check_registry"],
        )
        approval = Gate(
            prompt="Onboard supplier {input[order_id]}?",
            options=[Option("standard", "Standard terms"), Option("trial", "Trial")],
            min_selections=1,
            max_selections=1,
            after=["score_risk", "verify_sites"],
        )
        activate = Task(f"{DEMO}.send_receipt", after=["approval", "fetch_documents"])

    return SupplierOnboarding


def build_demo() -> dict:
    from django.contrib.auth.models import Permission, User
    from django.core.management import call_command
    from django.utils import timezone

    import workflows
    from workflows.models import Run
    from workflows.testing import run_pending

    call_command("migrate", verbosity=0)
    operator = User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    for codename in ("view_run", "start_run", "operate_run", "view_fanoutitem", "view_step"):
        operator.user_permissions.add(Permission.objects.get(codename=codename))
    admin = User.objects.create_superuser("admin", password=PASSWORD)
    onboarding = onboarding_workflow()
    parcels = [{"id": f"P{n}", "weight_kg": 0.5 + n} for n in range(1, 4)]
    later = timezone.now() + timedelta(days=1)
    ids: dict[str, str] = {}

    def dispatch(order: str, card: str = "valid", decide: bool = False) -> Run:
        run = workflows.start_run(
            "warehouse_dispatch",
            {"order_id": order, "card": card, "parcels": parcels},
            business_key=order,
        )
        run_pending()
        if decide:
            workflows.approve_gate(
                run.steps.get(name="approval"), user=admin, selections=["express"]
            )
            run_pending(until=later)
        return run

    for n in range(8):
        run = workflows.start_run(
            "order_fulfilment",
            {"order_id": f"A-{1200 + n}", "lines": [{"sku": "BOOK", "quantity": 1, "price": "9"}]},
            business_key=f"A-{1200 + n}",
        )
        run_pending(until=later if n < 6 else None)
    for n in range(5):
        dispatch(f"W-{3100 + n}", decide=n < 2)
    ids["failed"] = str(dispatch("W-3190", card="declined", decide=True).pk)
    workflows.start_run("flaky_import", {"rows": 40}, business_key="import-0611")
    run_pending()
    paused = dispatch("W-3201")
    workflows.pause_run(paused, reason="warehouse stocktake", user=admin)
    terminated = dispatch("W-3202")
    workflows.terminate_run(terminated, reason="duplicate order", user=admin)
    mid = workflows.start_run(
        onboarding, {"order_id": "SUP-77", "parcels": parcels}, business_key="SUP-77"
    )
    run_pending()
    ids["mid"] = str(mid.pk)
    # Spread finished runs over the last day, so the dashboard's chart has a shape.
    rng = random.Random(7)
    now = timezone.now()
    for run in Run.objects.exclude(pk=mid.pk):
        created = now - timedelta(minutes=rng.randint(5, 23 * 60))
        changes = {"created_at": created, "started_at": created}
        if run.finished_at:
            changes["finished_at"] = created + timedelta(seconds=rng.randint(20, 900))
        Run.objects.filter(pk=run.pk).update(**changes)
    return ids


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        page = camera.page
        page.goto("/admin/workflows/run/")
        camera.photo("runs-list")
        page.goto(f"/admin/workflows/run/{ids['mid']}/change/")
        camera.photo("run-page")
        page.goto(f"/admin/workflows/run/{ids['failed']}/change/")
        camera.photo("run-page-compensated")
        page.goto("/admin/workflows/run/?status__exact=waiting")
        page.locator("#action-toggle").check()
        page.locator('select[name="action"]').select_option("bulk_cancel")
        page.get_by_role("button", name="Go").click()
        camera.photo("bulk-cancel-dry-run")
        page.goto("/admin/workflows/run/dashboard/")
        camera.photo("dashboard")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
