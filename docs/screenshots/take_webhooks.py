"""Take the webhook screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_webhooks.py

Like ``take.py`` (whose database setup and server it reuses): demo runs in a temporary
SQLite database whose events go to three endpoints served on 127.0.0.1 by the test
suite's receiver: one that answers 200, one that answers 503 (retries, then failed for
good) and one that answers 410 Gone (disabled). The endpoints list, an endpoint's page,
the delivery log (a long one, with 30 orders), a failed delivery's page, the log
filtered to nothing, and the log as a staff user who may view runs but not webhooks.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

ENDPOINTS = (
    ("ERP order sync", [200], ["run.started", "run.completed", "run.failed", "gate.decided"]),
    ("Ops chat relay", [503], ["step.failed", "gate.waiting"]),
    ("Analytics (retired)", [410], ["*"]),
)


def build_demo() -> dict:
    """Endpoints, runs of the demo workflow, and the deliveries they made."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import override_settings
    from django.utils import timezone

    import workflows
    from tests.support.webhook_receiver import Receiver
    from workflows.models import WebhookDelivery
    from workflows.testing import run_pending
    from workflows.webhooks.services import create_endpoint

    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import Permission

    User.objects.create_superuser("operator", password=PASSWORD)
    viewer = User.objects.create_user("viewer", password=PASSWORD, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    receivers = [Receiver(script=script) for _, script, _ in ENDPOINTS]
    delays = [timedelta(seconds=5), timedelta(minutes=5), timedelta(minutes=30)]
    with override_settings(WORKFLOWS={"EXECUTOR": "inline", "WEBHOOK_RETRY_DELAYS": delays}):
        for receiver, (description, _, types) in zip(receivers, ENDPOINTS, strict=True):
            receiver.__enter__()
            endpoint = create_endpoint(url=receiver.url, event_types=types, description=description)
            receiver.secret = endpoint.secret
        parcels = [{"id": "P1", "weight_kg": 1.5}]
        orders = [(f"W-{4101 + n}", "declined" if n % 3 == 1 else "valid") for n in range(30)]
        for order, card in orders:
            workflows.start_run(
                "warehouse_dispatch",
                {"order_id": order, "card": card, "city": "Lyon", "parcels": parcels},
                business_key=order,
            )
            run_pending(until=timezone.now() + timedelta(hours=1))
    for receiver in receivers:
        receiver.__exit__(None, None, None)
    failed = WebhookDelivery.objects.filter(status="failed", response_status=503).first()
    erp = WebhookDelivery.objects.filter(status="delivered").first()
    return {"erp": erp.endpoint_id, "failed": failed.pk}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        for name, url in (
            ("webhook-endpoints", "/admin/workflows/webhookendpoint/"),
            ("webhook-endpoint", f"/admin/workflows/webhookendpoint/{ids['erp']}/change/"),
            ("webhook-deliveries", "/admin/workflows/webhookdelivery/"),
            (
                "webhook-delivery-failed",
                f"/admin/workflows/webhookdelivery/{ids['failed']}/change/",
            ),
        ):
            camera.page.goto(url)
            camera.photo(name)
        camera.page.goto("/admin/workflows/webhookdelivery/?status__exact=sending")
        camera.photo("webhook-deliveries-empty")
    with signed_in(base_url, "viewer") as viewer:
        viewer.page.goto("/admin/workflows/webhookdelivery/")
        viewer.photo("webhook-deliveries-forbidden")
    return camera.taken + viewer.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
