"""Take the revoke screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_revoke.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): a
nightly export whose ``upload`` step is held by a worker that still heartbeats (its
lease keeps moving) and whose ``shards`` fan-out has two items running; the run page
with its "Revoke lease" button, the confirmation page listing the run's running
attempts with their workers and leases, the page after the revoke, and the API's
documentation of ``POST /api/steps/{id}/revoke/``.
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

    import workflows
    from workflows import FanOut, Retry, Task, Workflow
    from workflows.engine import ITEM, claim, claim_step, complete_work, heartbeat
    from workflows.models import FanOutItem

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)
    handler = "flowsite.demo.steps.reserve_stock"

    class NightlyExport(Workflow):
        name = "nightly_export"
        extract = Task(handler)
        upload = Task(handler, timeout=timedelta(minutes=5), retry=Retry(max_attempts=3))
        shards = FanOut(
            handler,
            items=lambda ctx: [f"eu-{n}" for n in range(1, 5)],
            key=lambda shard: shard,
            after=["extract"],
            timeout=timedelta(minutes=2),
        )
        publish = Task(handler, after=["upload", "shards"])

    run = workflows.start_run(
        NightlyExport, {"day": "2026-11-26"}, business_key="export-2026-11-26"
    )
    extract = claim_step(run.steps.get(name="extract").pk, "worker-2.prod:30114:139872")
    complete_work(extract, {"rows": 1_284_118})
    upload = claim_step(run.steps.get(name="upload").pk, "worker-5.prod:48213:140121")
    assert upload is not None
    heartbeat(upload)  # wedged on a hung connection, yet its heartbeat thread runs
    for key, owner in (("eu-1", "worker-1.prod:29011:140511"), ("eu-2", "worker-3.prod:7731:1")):
        item = FanOutItem.objects.get(step__run=run, key=key)
        claim(ITEM, item.pk, owner)
    return {"run": str(run.pk), "upload": run.steps.get(name="upload").pk}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        page = camera.page
        page.goto(f"/admin/workflows/run/{ids['run']}/change/")
        camera.photo("run-page-running-lease")
        page.get_by_role("link", name="Revoke lease “upload”").click()
        page.wait_for_load_state()
        page.get_by_label("Reason").fill("worker-5 wedged on a hung SFTP connection")
        camera.photo("revoke-lease")
        page.get_by_role("button", name="Revoke lease").click()
        page.wait_for_load_state()
        camera.photo("revoke-lease-done")
        # The API's documentation of the operation, opened: its body, examples, answers.
        page.goto("/api/docs/#/steps/steps_revoke_create")
        operation = page.locator("#operations-steps-steps_revoke_create")
        operation.locator(".opblock-body").wait_for()
        # From its title to its 200 answer: the error answers below are the envelope's.
        camera.photo_until("api-revoke", operation, "tr.response[data-code='400']")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
