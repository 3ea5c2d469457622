"""Take the Schedules screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_schedules.py

Like ``take.py`` (whose database setup and server it reuses): the samples of the
console's tests (a nightly cron in Europe/Berlin with three backfilled runs, an
interval every 5 minutes paused with a note, an hourly schedule whose second slot was
skipped), then the Schedules list and the hourly schedule's page.
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

    from tests.admin.schedule_samples import make_samples

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)
    samples = make_samples()
    return {"held": samples.held.pk}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        camera.page.goto("/admin/workflows/schedule/")
        camera.photo("schedules-list")
        camera.page.goto(f"/admin/workflows/schedule/{ids['held']}/change/")
        camera.photo("schedule-page")
        camera.page.get_by_role("link", name="Backfill").click()
        camera.page.get_by_label("Start").fill("2026-01-01 00:00")
        camera.page.get_by_label("End").fill("2026-01-02 00:00")
        camera.page.get_by_role("button", name="Count the slots").click()
        camera.page.wait_for_load_state()
        camera.photo("schedule-backfill")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
