"""Take the deadline screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_deadlines.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): a trip
booking that must end within the hour, waiting for the customer's confirmation (its run
page shows the deadline and the time left); the runs list filtered to runs whose
deadline is within the hour; a booking whose deadline passed, failed and compensated,
with the retry's reasons among the actions; and the API's documentation of starting a
run with a ``deadline``.
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
    from django.utils import timezone

    import workflows
    from workflows import Task, WaitForSignal, Workflow
    from workflows.testing import run_pending

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)
    reserve, release = "flowsite.demo.steps.reserve_stock", "flowsite.demo.steps.release_stock"

    class TripBooking(Workflow):
        """Hold a seat and a room, wait for the customer to confirm, then ticket."""

        name = "trip_booking"
        deadline = timedelta(hours=2)
        hold_seat = Task(reserve, compensate=release)
        hold_room = Task(reserve, compensate=release)
        confirmed = WaitForSignal("customer_confirmed")
        ticket = Task(reserve)

    data = {"order_id": "T-1042", "lines": [{"sku": "SEAT-12A", "quantity": 1}]}
    waiting = workflows.start_run(
        TripBooking, data, business_key="T-1042", deadline=timedelta(minutes=45)
    )
    later = workflows.start_run(TripBooking, {**data, "order_id": "T-1043"}, business_key="T-1043")
    late = workflows.start_run(
        TripBooking,
        {**data, "order_id": "T-1039"},
        business_key="T-1039",
        deadline=timedelta(minutes=30),
    )
    run_pending()
    run_pending(until=timezone.now() + timedelta(minutes=31))  # T-1039's deadline passes
    return {"waiting": str(waiting.pk), "later": str(later.pk), "late": str(late.pk)}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        page = camera.page
        page.goto(f"/admin/workflows/run/{ids['waiting']}/change/")
        camera.photo("run-page-deadline")
        page.goto("/admin/workflows/run/?deadline=hour")
        camera.photo("runs-list-deadline")
        page.goto(f"/admin/workflows/run/{ids['late']}/change/")
        page.get_by_text("Not possible now").click()
        camera.photo("run-page-deadline-exceeded")
        # The API's documentation of starting a run, opened at its body's fields.
        page.goto("/api/docs/#/runs/runs_create")
        operation = page.locator("#operations-runs-runs_create")
        operation.locator(".opblock-body").wait_for()
        operation.get_by_text("Schema").first.click()
        deadline = operation.locator("tr.property-row", has_text="deadline")
        deadline.locator(".model-toggle").first.click()
        collapsed = deadline.locator(".model-toggle.collapsed")
        for _ in range(2):  # the two forms it takes: seconds, or text
            if collapsed.count():
                collapsed.first.click()
        camera.photo_until("api-start-deadline", operation, ".responses-wrapper")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
