"""Take the routing screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_routing.py

Like ``take.py`` (whose database setup and server it reuses): a model-refresh run whose
default-queue steps are done and whose training step, on queue ``gpu`` requiring
``cuda``, waits because the only GPU worker is gone; and the admin's Workers page with
two web hosts alive and that GPU host gone. The site judges routes as a deployment with
django-q2 workers does (``EXECUTOR = "django_q"``); nothing is sent to a queue.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

DEMO = "flowsite.demo.steps"


def build_demo() -> dict:
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import override_settings
    from django.utils import timezone

    import workflows
    from workflows import Task, Workflow
    from workflows.engine import claim_step, complete_work
    from workflows.engine.routing import INLINE_OWNER, WorkerRoutes
    from workflows.models import WorkerPresence
    from workflows.workers.presence import report_presence

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)

    class ModelRefresh(Workflow):
        name = "model_refresh"
        export = Task(f"{DEMO}.import_batch")
        check_sample = Task(f"{DEMO}.compute_tax")
        train = Task(f"{DEMO}.reserve_stock", queue="gpu", requires={"cuda"})
        publish = Task(f"{DEMO}.send_receipt")

    with override_settings(WORKFLOWS={"EXECUTOR": "inline"}):
        run = workflows.start_run(ModelRefresh, {"model": "churn-v7"}, business_key="churn-v7")
        for name in ("export", "check_sample"):
            lease = claim_step(run.steps.get(name=name).pk, INLINE_OWNER)
            complete_work(lease, {"rows": 182_400} if name == "export" else {"ok": True})

    now = timezone.now()
    for name, queues, capabilities, started, seen in (
        ("web-1:2141", ["default"], [], timedelta(days=3, hours=2), timedelta(seconds=4)),
        ("web-2:1877", ["default"], [], timedelta(hours=9, minutes=12), timedelta(seconds=7)),
        ("gpu-1:3312", ["default", "gpu"], ["cuda", "fp16"], timedelta(days=1), timedelta(hours=2)),
    ):
        report_presence(name, WorkerRoutes(frozenset(queues), frozenset(capabilities)))
        WorkerPresence.objects.filter(name=name).update(
            started_at=now - started, seen_at=now - seen
        )
    return {"run": str(run.pk)}


def shoot(base_url: str, ids: dict) -> list[Path]:
    from django.test import override_settings

    with (
        override_settings(WORKFLOWS={"EXECUTOR": "django_q"}),
        signed_in(base_url, "operator") as camera,
    ):
        camera.page.goto(f"/admin/workflows/run/{ids['run']}/change/")
        camera.photo("run-page-waiting-for-worker")
        camera.page.goto("/admin/workflows/workerpresence/")
        camera.photo("workers")
    return camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
