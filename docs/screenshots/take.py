"""Take the approval screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take.py

Builds demo data in a temporary SQLite database (nothing of ``var/`` is touched), serves
the site from a thread of this process and photographs it with the browser tests'
Chromium setup (``tests/browser/chromium.py``): the admin index, the inbox with a few
gates, a decision form, and each signed-link page (confirm, 403, 409, 410).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PASSWORD = "screenshots"


def configure(var_dir: str) -> None:
    """Point the demo project at a fresh database before Django loads its settings."""
    sys.path.insert(0, str(ROOT))
    os.environ["FLOWSITE_VAR_DIR"] = var_dir
    os.environ["FLOWSITE_EXECUTOR"] = "inline"
    os.environ["DJANGO_SETTINGS_MODULE"] = "flowsite.settings"
    # Playwright's sync API keeps an asyncio loop on this thread; the ORM calls made
    # here between browser steps are plain synchronous ones.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"


def build_demo() -> dict:
    """Users and waiting gates: four dispatches, one claimed by a colleague."""
    from django.contrib.auth.models import Permission, User
    from django.core.management import call_command

    import workflows
    from workflows.testing import run_pending

    call_command("migrate", verbosity=0)
    approve = Permission.objects.get(codename="approve_dispatch")
    view_run = Permission.objects.get(codename="view_run")
    people = {}
    for name in ("dispatcher", "packer"):
        user = User.objects.create_user(name, password=PASSWORD, is_staff=True)
        user.user_permissions.add(approve, view_run)
        people[name] = User.objects.get(pk=user.pk)
    parcels = [{"id": f"P{n}", "weight_kg": 0.5 + n} for n in range(1, 4)]
    gates = []
    for order, city in (
        ("W-3101", "Lyon"),
        ("W-3102", "Porto"),
        ("W-3103", "Gdańsk"),
        ("W-3104", "Tampere"),
    ):
        run = workflows.start_run(
            "warehouse_dispatch",
            {"order_id": order, "card": "valid", "city": city, "parcels": parcels},
            business_key=order,
        )
        run_pending()
        gates.append(run.steps.get(name="approval"))
        time.sleep(0.05)  # distinct waiting times, oldest first
    workflows.claim_gate(gates[1], people["packer"], address="10.0.0.7")
    return {"people": people, "gates": gates}


def serve() -> str:
    """Serve the site (with static files) from a daemon thread; return its address."""
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadedWSGIServer(("127.0.0.1", 0), Quiet)
    server.set_app(StaticFilesHandler(WSGIHandler()))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}"


def old_link(gate, user) -> str:
    """A link signed four days ago: past the default three-day age."""
    from django.core import signing

    import workflows

    stamp = signing.b62_encode(int(time.time()) - 4 * 24 * 3600)
    original = signing.TimestampSigner.timestamp
    signing.TimestampSigner.timestamp = lambda self: stamp
    try:
        return workflows.approval_link(gate, user)
    finally:
        signing.TimestampSigner.timestamp = original


class Camera:
    """A Chromium page at 1400 px, signed in to the admin; ``photo(name)`` saves a
    full-page screenshot as ``docs/screenshots/<name>.png`` and remembers its path."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.taken: list[Path] = []

    def photo(self, name: str, clip: dict | None = None) -> None:
        path = HERE / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True, clip=clip)
        self.taken.append(path)

    def photo_until(self, name: str, element: Any, stop: str) -> None:
        """Photograph ``element`` from its top down to its first descendant matching the
        CSS selector ``stop``, measured in the page in one go (a deep link may still be
        scrolling)."""
        box = element.evaluate(
            """(element, stop) => {
                const top = element.getBoundingClientRect();
                const end = element.querySelector(stop);
                return {x: top.left + window.scrollX, y: top.top + window.scrollY,
                        width: top.width, height: end.getBoundingClientRect().top - top.top};
            }""",
            stop,
        )
        self.photo(name, clip=box)


@contextmanager
def signed_in(base_url: str, username: str) -> Iterator[Camera]:
    """A :class:`Camera` whose page is signed in to the admin as ``username``."""
    from playwright.sync_api import sync_playwright

    from tests.browser.chromium import VIEWPORT, launch

    with sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_context(viewport=VIEWPORT, base_url=base_url).new_page()
        page.goto("/admin/login/?next=/admin/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_load_state()
        try:
            yield Camera(page)
        finally:
            browser.close()


def shoot(base_url: str, demo: dict) -> list[Path]:
    import workflows

    dispatcher = demo["people"]["dispatcher"]
    first, _, third, fourth = demo["gates"]
    confirm_link = workflows.approval_link(third, dispatcher)
    expired_link = old_link(fourth, dispatcher)
    used_link = workflows.approval_link(first, dispatcher)
    token = used_link.rstrip("/").rsplit("/", 1)[1]
    tampered_link = used_link.replace(token, token[:-4] + "AAAA")

    with signed_in(base_url, "dispatcher") as camera:
        page = camera.page
        camera.photo("admin-index")
        page.get_by_role("link", name="Approvals inbox").click()
        camera.photo("approvals-inbox")
        page.get_by_role("link", name=f"Decide gate {first.pk}").click()
        page.get_by_label("Express").check()
        page.get_by_label("Feedback").fill("Customer paid for express shipping.")
        camera.photo("approval-decision")
        page.get_by_role("button", name="Approve").click()
        page.wait_for_load_state()
        for name, link in (
            ("link-confirm", confirm_link),
            ("link-403-tampered", tampered_link),
            ("link-409-used", used_link),
            ("link-410-expired", expired_link),
        ):
            page.goto(link)
            camera.photo(name)
    return camera.taken


def take_screenshots(
    build: Callable[[], dict], shoot_pages: Callable[[str, dict], list[Path]]
) -> None:
    """In a temporary database: set Django up, ``build`` the demo data, serve the site
    and ``shoot_pages`` of it; print where each screenshot went."""
    with tempfile.TemporaryDirectory(prefix="flowsite-screenshots-") as var_dir:
        configure(var_dir)
        import django

        django.setup()
        demo = build()
        for path in shoot_pages(serve(), demo):
            print(path.relative_to(ROOT))


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
