"""Take the demo flow's screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_demo_flow.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): the
Flows list of a fresh site, before any flow exists, with its help on how flows are
made; then, once ``manage.py demo_setup`` has run and its runs have been worked through
in-process (as the demo's worker would), the page of the demo flow ``stock sync``:
completed members, a failed feed, a member cancelled because of it and one still
blocked behind it.
"""

from __future__ import annotations

import sys
from io import StringIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402


def build_site() -> dict:
    """A migrated database with the demo's admin user, signed in with the screenshots'
    password; no flow yet."""
    from django.contrib.auth.models import User
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("admin", password=PASSWORD)
    return {}


def run_demo_setup() -> str:
    """``demo_setup``, then every run's work as the demo's worker does it (the import's
    rows without their pause); the demo flow's id."""
    from django.core.management import call_command

    from flowsite.demo import steps
    from flowsite.demo.stock_sync import KEY
    from workflows.models import Flow
    from workflows.testing import run_pending

    call_command("demo_setup", stdout=StringIO())
    steps.SECONDS_PER_ROW = 0
    run_pending()
    return str(Flow.objects.get(key=KEY).pk)


def shoot(base_url: str, _: dict) -> list[Path]:
    with signed_in(base_url, "admin") as camera:
        camera.page.goto("/admin/workflows/flow/")
        camera.photo("flows-list-none")
        flow_id = run_demo_setup()
        camera.page.goto(f"/admin/workflows/flow/{flow_id}/change/")
        camera.photo("flow-page-demo")
    return camera.taken


def main() -> None:
    take_screenshots(build_site, shoot)


if __name__ == "__main__":
    main()
