"""Take the run metadata screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_run_metadata.py

Like ``take.py`` (whose database setup and server it reuses): runs started from code,
the API, the console, a command and a schedule, some with a title; a failed run
dismissed. The runs list (title over the workflow, the trigger column and filter), the
same list showing dismissed runs, and the dismissed run's page (title, trigger, who
dismissed it, Undismiss offered).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402


def build_demo() -> dict:
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import override_settings

    import workflows
    from workflows import Task, WaitForSignal, Workflow

    call_command("migrate", verbosity=0)
    operator = User.objects.create_superuser("operator", password=PASSWORD)

    class Invoice(Workflow):
        name = "invoice"
        unique_business_key = True
        paid = WaitForSignal("paid")

    class Import(Workflow):
        name = "supplier_import"
        fetch = Task("flowsite.demo.steps.import_batch")

    starts = [
        ("code", "Invoice for ACME, March", "INV-0042"),
        ("api", "Invoice for Globex, March", "INV-0043"),
        ("admin", "Credit note for Initech", ""),
        ("command", "", "INV-0045"),
    ]
    with override_settings(WORKFLOWS={"EXECUTOR": "inline"}):
        for trigger, title, key in starts:
            workflows.start_run(
                Invoice,
                {"amount": 120},
                title=title,
                business_key=key or None,
                trigger=trigger,
                user=operator if trigger in ("api", "admin") else None,
            )
        workflows.create_schedule(Import, key="nightly-import", every=timedelta(hours=24))
        workflows.trigger_schedule("nightly-import")
        failed = workflows.start_run(
            Invoice, {"amount": 9}, title="Duplicate invoice for ACME", trigger="api"
        )
        workflows.cancel_run(failed, reason="a duplicate, refunded by hand")
        workflows.dismiss_run(failed, user=operator)
    return {"dismissed": str(failed.pk)}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        camera.page.goto("/admin/workflows/run/")
        camera.photo("runs-list-title-trigger")
        camera.page.goto("/admin/workflows/run/?dismissed=all")
        camera.photo("runs-list-dismissed-all")
        camera.page.goto(f"/admin/workflows/run/{ids['dismissed']}/change/")
        camera.photo("run-page-dismissed")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
