"""Browser tests: real headless Chromium driven by Playwright against ``live_server``.

Skipped only where Chromium is truly absent and ``CI`` is unset (a laptop without the
package); under CI a missing browser fails the run, so the layer cannot vanish quietly.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import sync_playwright

from tests.browser.chromium import CHROMIUM, VIEWPORT, launch


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fresh Chromium for one test, stopped afterwards.

    Playwright's sync API keeps an asyncio loop registered on the test's thread while it
    is started, so Django's guard would refuse the test's own ORM calls, though no
    coroutine runs while test code does: the guard is lifted for this test only. One
    browser per test, so the loop is gone before the next (non-browser) test runs.

    Test code under Playwright runs in a context of its own, so Django's per-context
    connections open a second one there; it is closed before the loop goes, or
    PostgreSQL would refuse to drop the test database it still uses.
    """
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()
        connections.close_all()


@pytest.fixture
def new_page(browser: Any, live_server: Any) -> Iterator[Any]:
    """Make pages at 1400 px wide, each in its own context (its own cookies)."""
    contexts = []

    def make() -> Any:
        context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()
