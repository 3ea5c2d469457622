"""One way to start Debian's headless Chromium under Playwright, for the browser tests and
the screenshot script alike.

The browser is the system's ``/usr/bin/chromium`` (installed by ``.ci/run`` from the
distribution), never one downloaded by ``playwright install``. The flags keep it from
talking to anything but the site under test: no background networking, component or
sync updates, no QUIC; no sandbox, because CI containers run as root.
"""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = Path(os.environ.get("FLOWSITE_CHROMIUM", "/usr/bin/chromium"))
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The width the screenshots and the layout checks are made at.
VIEWPORT = {"width": 1400, "height": 900}
# Where the browser tests leave their screenshots, when set: the pages a change touches,
# to be looked at before it is called done (FLOWSITE_SHOTS_DIR=/tmp/shots make test).
SHOTS_DIR = os.environ.get("FLOWSITE_SHOTS_DIR")


def shoot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    """A full-page screenshot of ``page`` as ``<name>.png`` in ``$FLOWSITE_SHOTS_DIR``;
    nothing when that is unset."""
    if SHOTS_DIR:
        page.screenshot(path=str(Path(SHOTS_DIR) / f"{name}.png"), full_page=True)


def launch(playwright):  # type: ignore[no-untyped-def]
    """Start the system Chromium headless with :data:`FLAGS`."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
