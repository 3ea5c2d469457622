"""Take the approver's screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_approver.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): the
admin index of an approver who holds no model permission (the inbox first, nothing
else), a gate claimed by a colleague (who holds it, the buttons disabled), and the
start page refusing a workflow name that is not registered.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

PARCELS = [{"id": "P1", "weight_kg": 1.5}, {"id": "P2", "weight_kg": 0.4}]


def build_demo() -> dict:
    """An approver, a colleague who claimed one of two waiting gates, and a starter."""
    from django.contrib.auth.models import Permission, User
    from django.core.management import call_command

    import workflows
    from workflows.testing import run_pending

    call_command("migrate", verbosity=0)
    approve = Permission.objects.get(codename="approve_dispatch")
    for name in ("approver", "packer"):
        User.objects.create_user(name, password=PASSWORD, is_staff=True).user_permissions.add(
            approve
        )
    starter = User.objects.create_user("starter", password=PASSWORD, is_staff=True)
    starter.user_permissions.add(*Permission.objects.filter(codename__in=["start_run", "view_run"]))
    gates = []
    for order in ("W-4101", "W-4102"):
        run = workflows.start_run(
            "warehouse_dispatch",
            {"order_id": order, "card": "valid", "parcels": PARCELS},
            business_key=order,
        )
        run_pending()
        gates.append(run.steps.get(name="approval"))
    workflows.claim_gate(gates[1], User.objects.get(username="packer"), address="10.0.0.7")
    return {"claimed": gates[1]}


def shoot(base_url: str, demo: dict) -> list[Path]:
    taken = []
    with signed_in(base_url, "approver") as camera:
        camera.photo("approver-index")
        camera.page.goto(f"/admin/workflows/step/approvals/{demo['claimed'].pk}/")
        camera.photo("gate-claimed-by-someone-else")
        taken += camera.taken
    with signed_in(base_url, "starter") as camera:
        camera.page.goto("/admin/workflows/run/start/?workflow=Order_Fulfilment")
        camera.photo("start-unknown-workflow")
        taken += camera.taken
    return taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
