"""Take the change-priority screenshot in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_priority.py

Like ``take.py`` (whose database setup and server it reuses): a workflow allowing two
runs at a time, five runs started (three of them queued), and the confirmation page of
"Change priority" on a queued run as an operator sees it.
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
    from workflows import Task, WaitForSignal, Workflow

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)

    class Reindex(Workflow):
        name = "reindex_catalogue"
        max_concurrent_runs = 2
        approved = WaitForSignal("go")
        reindex = Task("flowsite.demo.steps.reserve_stock")

    with override_settings(WORKFLOWS={"EXECUTOR": "inline"}):
        runs = [
            workflows.start_run(Reindex, {"shop": shop}, business_key=shop)
            for shop in ("north", "south", "east", "west", "online")
        ]
    return {"queued": str(runs[3].pk)}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        camera.page.goto(f"/admin/workflows/run/{ids['queued']}/change/")
        camera.photo("run-page-queued")
        camera.page.goto(f"/admin/workflows/run/{ids['queued']}/act/priority/")
        camera.photo("change-priority")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
