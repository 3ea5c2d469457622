"""Take the held-work screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_limits.py

Like ``take.py`` (whose database setup and server it reuses): a run whose step waits for
a place under a concurrency key another run's attempt holds, and a run whose step a
rate limit delays until its release timer.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

DEMO = "flowsite.demo.steps"


def key(ctx) -> str:
    return "customer:42"


def build_demo() -> dict:
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import override_settings

    import workflows
    from workflows import Task, Workflow
    from workflows.engine import claim_step
    from workflows.engine.routing import INLINE_OWNER
    from workflows.errors import WorkHeld

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)

    class Charge(Workflow):
        name = "charge_customer"
        charge = Task(f"{DEMO}.compute_tax", concurrency_key=key)

    class Notify(Workflow):
        name = "notify_customer"
        send = Task(f"{DEMO}.send_receipt", rate_limit="1/h")

    with override_settings(WORKFLOWS={"EXECUTOR": "inline"}):
        a = workflows.start_run(Charge, {"customer": 42})
        b = workflows.start_run(Charge, {"customer": 42})
        claim_step(a.steps.get().pk, INLINE_OWNER)
        with contextlib.suppress(WorkHeld):
            claim_step(b.steps.get().pk, INLINE_OWNER)
        c = workflows.start_run(Notify, {})
        d = workflows.start_run(Notify, {})
        claim_step(c.steps.get().pk, INLINE_OWNER)
        with contextlib.suppress(WorkHeld):
            claim_step(d.steps.get().pk, INLINE_OWNER)
    return {"concurrency": str(b.pk), "rate": str(d.pk)}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        camera.page.goto(f"/admin/workflows/run/{ids['concurrency']}/change/")
        camera.photo("run-page-held-concurrency")
        camera.page.goto(f"/admin/workflows/run/{ids['rate']}/change/")
        camera.photo("run-page-held-rate")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
