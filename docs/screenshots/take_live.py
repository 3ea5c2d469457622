"""Take the live-run screenshots in docs/screenshots/ at 1400 px.

    .venv/bin/python docs/screenshots/take_live.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): a
catalogue export whose long step is running, claimed by a worker, and has reported
through the engine's own telemetry write (the one ``ctx.progress``, ``ctx.log`` and
``ctx.summary`` end in): its progress, a summary, and more log lines than its attempt
keeps, so the oldest were dropped; three event consumers, one behind, one reading only
the export's run outcomes. Photographed: the
run page with the step's progress bar and last log lines, the step's Log page with the
trim note, the Log page of a step that wrote nothing yet and of a parameter it did not
issue, the Event consumers page, and the Log page as a user without permission. Then a
second export whose first step waits for a worker: its page before the step starts,
the same page (not reloaded) once a worker claimed it and it reported progress, and
once the run was cancelled while the step runs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

ROWS = 1200
DONE = 466


def build_demo() -> dict:
    from django.contrib.auth.models import User
    from django.core.management import call_command

    import workflows
    from workflows import Task, Workflow
    from workflows.engine import claim_step, complete_work
    from workflows.engine.telemetry.flush import flush_telemetry
    from workflows.engine.telemetry.pending import PendingTelemetry, Progress
    from workflows.engine.telemetry.trimming import FrameBudget

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)
    handler = "flowsite.demo.steps.reserve_stock"

    class CatalogueExport(Workflow):
        name = "catalogue_export"
        load_catalogue = Task(handler)
        export_products = Task(handler, after=["load_catalogue"])
        publish_feed = Task(handler, after=["export_products"])

    run = workflows.start_run(
        CatalogueExport, {"shop": "north", "rows": ROWS}, business_key="export-2026-11-27"
    )
    loaded = claim_step(run.steps.get(name="load_catalogue").pk, "worker-3.prod:41877:140233")
    complete_work(loaded, {"rows": ROWS})
    step = run.steps.get(name="export_products")
    lease = claim_step(step.pk, "worker-3.prod:41877:140233")
    # The attempt keeps its last 40 lines: the first of the 89 below are dropped.
    budget = FrameBudget(max_frames=40, max_bytes=1 << 20)
    lines = [("stdout", f"connecting to catalogue-db (shop north, {ROWS} rows)")]
    for batch in range(1, DONE // 6 + 1):
        lines.append(("stdout", f"exported rows {6 * batch - 5}-{6 * batch}"))
        if batch % 9 == 0:
            lines.append(("event", f"checkpoint {batch // 9}: feed part {batch // 9} uploaded"))
        if batch % 23 == 0:
            lines.append(("stderr", f"row {6 * batch - 2}: price missing, exported without it"))
    now = time.time()
    pending = PendingTelemetry(
        progress=Progress(DONE, ROWS, f"exporting products: row {DONE} of {ROWS}"),
        frames=[
            (stream, text, now - (len(lines) - n) * 0.4, len(text.encode()))
            for n, (stream, text) in enumerate(lines)
        ],
        patches=[
            {"shop": "north", "rows": ROWS, "exported": DONE, "warnings": 3},
            {"feed": {"parts_uploaded": DONE // 54, "url": "s3://feeds/north/2026-11-27/"}},
        ],
    )
    flush_telemetry(lease, pending, budget)
    User.objects.create_user("visitor", password=PASSWORD, is_staff=True)
    billing = workflows.consume("billing-sync", limit=100)
    workflows.ack("billing-sync", billing[-1].cursor)
    workflows.consume("audit-export", limit=100)
    workflows.create_consumer(
        "export-outcomes", workflows=["catalogue_export"], kinds=["run.completed", "run.failed"]
    )
    silent = run.steps.get(name="publish_feed")
    waiting = workflows.start_run(
        CatalogueExport, {"shop": "south", "rows": ROWS}, business_key="export-2026-11-28"
    )
    return {
        "run": str(run.pk),
        "step": step.pk,
        "silent": silent.pk,
        "waiting": str(waiting.pk),
        "first": waiting.steps.get(name="load_catalogue").pk,
    }


def start_and_report(step_id: int) -> None:
    """A worker claims the step and reports progress and a line, as a handler does."""
    import time

    from workflows.engine import claim_step
    from workflows.engine.telemetry.flush import flush_telemetry
    from workflows.engine.telemetry.pending import PendingTelemetry, Progress
    from workflows.engine.telemetry.trimming import FrameBudget

    lease = claim_step(step_id, "worker-5.prod:41902:140871")
    line = "connecting to catalogue-db (shop south)"
    pending = PendingTelemetry(
        progress=Progress(120, ROWS, f"loading the catalogue: row 120 of {ROWS}"),
        frames=[("stdout", line, time.time(), len(line))],
        patches=[],
    )
    flush_telemetry(lease, pending, FrameBudget(max_frames=40, max_bytes=1 << 20))


def shoot_live(camera, ids: dict) -> None:  # type: ignore[no-untyped-def]
    """The waiting export's page as its first step starts, then as the run is cancelled."""
    import workflows

    page = camera.page
    page.goto(f"/admin/workflows/run/{ids['waiting']}/change/")
    camera.photo("run-page-live-before")
    start_and_report(ids["first"])
    page.locator(f"#live-{ids['first']} .live-line").first.wait_for()
    camera.photo("run-page-live-after")
    workflows.cancel_run(ids["waiting"], reason="south feed postponed")
    page.locator(f"#live-{ids['first']}.live-stopping").wait_for()
    camera.photo("run-page-cancelling")


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        page = camera.page
        page.goto(f"/admin/workflows/run/{ids['run']}/change/")
        page.locator(f"#live-{ids['step']} .live-line").first.wait_for()
        camera.photo("run-page-live")
        shoot_live(camera, ids)
        page.goto(f"/admin/workflows/run/{ids['run']}/steps/{ids['step']}/log/")
        camera.photo("step-log")
        page.goto(f"/admin/workflows/run/{ids['run']}/steps/{ids['silent']}/log/")
        camera.photo("step-log-empty")
        page.goto(f"/admin/workflows/run/{ids['run']}/steps/{ids['step']}/log/?after=abc")
        camera.photo("step-log-bad-parameter")
        page.goto("/admin/workflows/run/consumers/")
        camera.photo("event-consumers")
    with signed_in(base_url, "visitor") as visitor:
        visitor.page.goto(f"/admin/workflows/run/{ids['run']}/steps/{ids['step']}/log/")
        visitor.photo("step-log-no-permission")
    return camera.taken + visitor.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
