"""Take the Waits page and the failure-class screenshots in docs/screenshots/ at 1400 px.

    .venv/bin/python docs/screenshots/take_waits.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): runs
that wait in each way the Waits page lists (a gate, a signal, a sleep, a queued run),
and a run whose upload step failed three times for three reasons — a handler past its
timeout, a worker that vanished, then a permanent error — so its page shows the class
of each failure beside the error.
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
    from django.utils import timezone

    import workflows
    from workflows import Gate, Retry, Sleep, Task, WaitForSignal, Workflow
    from workflows.engine import STEP, claim_step, fail_attempt, fire_timer, reclaim
    from workflows.engine.failures import AttemptTimedOut
    from workflows.models import Timer

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)
    handler = "flowsite.demo.steps.reserve_stock"

    class Refund(Workflow):
        name = "refund_request"
        approve = Gate(prompt="Refund order {input[order]}?", timeout=timedelta(days=2))

    class Delivery(Workflow):
        name = "parcel_delivery"
        dispatched = WaitForSignal("carrier_pickup", timeout=timedelta(hours=12))
        cool_off = Sleep(timedelta(hours=24))

    class Reindex(Workflow):
        name = "reindex_catalogue"
        max_concurrent_runs = 1
        go = WaitForSignal("go")

    class Upload(Workflow):
        name = "nightly_upload"
        upload = Task(handler, timeout=timedelta(minutes=5), retry=Retry(max_attempts=3))

    with override_settings(WORKFLOWS={"EXECUTOR": "inline"}):
        for order in ("R-1001", "R-1002"):
            workflows.start_run(Refund, {"order": order}, business_key=order)
        parcel = workflows.start_run(Delivery, {}, business_key="P-77", deadline=timedelta(days=1))
        for shop in ("north", "south"):
            workflows.start_run(Reindex, {"shop": shop}, business_key=shop)
        # Delivered: the run sleeps through its cool-off.
        workflows.send_signal(parcel, "carrier_pickup", {"carrier": "DHL"})
    # Queued for django-q2 workers that never come: each attempt is claimed by hand.
    with override_settings(WORKFLOWS={"EXECUTOR": "django_q"}):
        run = workflows.start_run(Upload, {}, business_key="upload-2026-11-26")
        step = run.steps.get(name="upload")
        lease = claim_step(step.pk, "worker-2.prod:30114:139872")
        fail_attempt(lease, AttemptTimedOut("upload ran past its timeout of 0:05:00"))
        fire_timer(Timer.objects.get(step=step, kind="retry").pk)
        claim_step(step.pk, "worker-5.prod:48213:140121")
        reclaim(STEP, step.pk, now=timezone.now() + timedelta(hours=1))
        lease = claim_step(step.pk, "worker-1.prod:29011:140511")
        fail_attempt(lease, workflows.PermanentError("bucket 'exports' does not exist"))
    return {"run": str(run.pk)}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        page = camera.page
        page.goto("/admin/workflows/run/waits/")
        camera.photo("waits")
        page.goto(f"/admin/workflows/run/{ids['run']}/change/")
        camera.photo("run-page-failure-classes")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
