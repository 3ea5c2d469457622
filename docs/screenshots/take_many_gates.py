"""Take the screenshots of the console with more waiting gates than it lists, at 1400 px.

    .venv/bin/python docs/screenshots/take_many_gates.py

Like ``take.py`` (whose database setup and server it reuses): 1,005 refund requests
wait at their approval gate in a temporary SQLite database. The approvals inbox lists
the oldest 100 and says so; the admin index's Approvals module and the dashboard count
the gates up to 1,000 and say "more than 1000" beyond (issue #26: a page no longer
loads every waiting gate to count them).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

GATES = 1_005


def build_demo() -> dict:
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import override_settings

    import workflows
    from workflows import Gate, Workflow

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)

    class Refund(Workflow):
        name = "refund_request"
        approve = Gate(prompt="Refund order {input[order]}?", timeout=timedelta(days=2))

    with override_settings(WORKFLOWS={"EXECUTOR": "inline"}):
        for n in range(GATES):
            order = f"R-{1000 + n}"
            workflows.start_run(Refund, {"order": order}, business_key=order)
    return {}


def shoot(base_url: str, demo: dict) -> list[Path]:
    from django.urls import reverse

    with signed_in(base_url, "operator") as camera:
        page = camera.page
        camera.photo("admin-index-many-gates", clip={"x": 0, "y": 0, "width": 1400, "height": 700})
        page.goto(reverse("admin:workflows_approvals"))
        camera.photo("approvals-inbox-many", clip={"x": 0, "y": 0, "width": 1400, "height": 700})
        page.goto(reverse("admin:workflows_dashboard"))
        section = page.locator("section[aria-labelledby=gates-title]").bounding_box()
        camera.photo("dashboard-many-gates", clip=section)
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
