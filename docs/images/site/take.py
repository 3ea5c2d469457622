"""Take the documentation site's screenshots in docs/images/site/ at 1400 px wide.

    make docs && .venv/bin/python docs/images/site/take.py

Serves the built site (``site/``) on a free local port and photographs, in the
distribution's Chromium: the home page, a guide page (flows) and the Python reference
at ``start_run``, whose rendered signature is what the reference is for.
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent
SITE = HERE.parents[2] / "site"
# page → (path in the site, screenshot file)
PAGES = {
    "home": ("", "home.png"),
    "guide": ("guide/flows/", "guide-flows.png"),
    "reference": ("reference/python/#starting-runs-signals-and-callbacks", "reference-python.png"),
}


class QuietHandler(SimpleHTTPRequestHandler):
    """Serves the site without a log line per request."""

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    if not (SITE / "index.html").exists():
        raise SystemExit("site/ is not built: run `make docs` first")
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            for path, filename in PAGES.values():
                page.goto(base + path)
                page.wait_for_load_state("networkidle")
                page.screenshot(path=str(HERE / filename))
                print(HERE / filename)
            browser.close()
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
