"""A manager deletes an event consumer from the console's Event consumers page, in a real
browser: the Delete link, its confirmation page, and the page without it afterwards."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

import workflows
from tests.browser.chromium import shoot
from workflows.models import Event, EventConsumer, Run

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct-horse-battery"
# Where the screenshots go when set (a directory), for a person to look at.


def manager() -> User:
    user = User.objects.create_user("manager", password=PASSWORD, is_staff=True)
    for codename in ("view_run", "manage_consumers"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def shot(page, name: str) -> None:
    shoot(page, f"reads-{name}")


def test_a_manager_deletes_a_consumer_after_confirming(new_page):
    run = Run.objects.create(workflow_name="browser_consumers", workflow_version=1, snapshot={})
    for n in range(4):
        Event.objects.create(run=run, type=f"e{n}")
    events = workflows.consume("billing")
    workflows.ack("billing", events[1].cursor)
    workflows.create_consumer("stale-reader")
    manager()
    page = new_page()
    page.goto("/admin/login/?next=/admin/workflows/run/consumers/")
    page.get_by_label("Username").fill("manager")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()

    table = page.locator("#consumers")
    assert "stale-reader" in table.inner_text() and "billing" in table.inner_text()
    shot(page, "consumers-page")
    page.get_by_label("Delete the consumer stale-reader").click()
    assert "4 events not yet acknowledged" in page.locator(".what").inner_text()
    shot(page, "consumer-delete-confirm")
    assert EventConsumer.objects.filter(name="stale-reader").exists()
    page.get_by_role("button", name="Delete the consumer").click()
    page.wait_for_load_state()
    assert "Consumer “stale-reader” deleted." in page.locator(".messagelist .success").inner_text()
    assert "stale-reader" not in page.locator("#consumers").inner_text()
    shot(page, "consumer-deleted")
    assert list(EventConsumer.objects.values_list("name", flat=True)) == ["billing"]
