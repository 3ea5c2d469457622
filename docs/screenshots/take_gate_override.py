"""Take the gate-skip screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_gate_override.py

Like ``take.py`` (whose database setup and server it reuses): an operator whom the
dispatch gate's rule does not admit finds the gate's decision and skip under "Not
possible now" on the run page, and is refused when skipping it by the form's address;
one who holds ``workflows.override_gate_rule`` skips it through the console's form, and
the run page then shows the override.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402


def build_demo() -> dict:
    from django.contrib.auth.models import Permission, User
    from django.core.management import call_command
    from django.test import override_settings

    import workflows
    from workflows.testing import run_pending

    call_command("migrate", verbosity=0)
    operate = Permission.objects.filter(codename__in=["view_run", "operate_run"])
    for name, extra in (("operator", []), ("duty-manager", ["override_gate_rule"])):
        user = User.objects.create_user(name, password=PASSWORD, is_staff=True)
        user.user_permissions.add(*operate, *Permission.objects.filter(codename__in=extra))
    order = {"order_id": "A-1042", "parcels": [{"id": "P1", "weight_kg": 2.5}]}
    with override_settings(WORKFLOWS={"EXECUTOR": "inline"}):
        run = workflows.start_run("warehouse_dispatch", order)
        run_pending()
    gate = run.steps.get(name="approval")
    assert gate.status == "waiting", gate.status
    return {"run": str(run.pk), "gate": gate.pk}


def skip(camera, demo: dict, photo_form: str | None, photo_after: str) -> None:
    """Skip the gate through the run's "Skip a step" form, photographing the result."""
    page = camera.page
    page.goto(f"/admin/workflows/run/{demo['run']}/act/skip_step/?step={demo['gate']}")
    page.get_by_label("Output").fill(json.dumps({"selections": ["express"]}))
    if photo_form:
        camera.photo(photo_form)
    page.get_by_role("button", name="Skip a step").click()
    page.wait_for_load_state()
    camera.photo(photo_after)


def shoot(base_url: str, demo: dict) -> list[Path]:
    taken: list[Path] = []
    with signed_in(base_url, "operator") as camera:
        camera.page.goto(f"/admin/workflows/run/{demo['run']}/change/")
        camera.page.get_by_text("Not possible now").click()
        camera.photo_until("run-page-operator", camera.page.locator("#content"), "#graph-title")
        skip(camera, demo, "skip-gate-form", "skip-gate-refused")
    taken += camera.taken
    with signed_in(base_url, "duty-manager") as camera:
        skip(camera, demo, None, "run-page-gate-override")
    return taken + camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
