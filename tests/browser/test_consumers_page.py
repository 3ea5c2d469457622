"""A manager deletes an event consumer from the console's Event consumers page, in a real
browser: the Delete link, its confirmation page, and the page without it afterwards."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

import workflows
from tests.browser.chromium import shoot
from tests.support.browser import person, sign_in
from workflows.models import Event, EventConsumer, Run
from workflows.queries.event_cursor import Position, encode_cursor

pytestmark = pytest.mark.django_db(transaction=True)


def manager() -> User:
    return person("manager", "view_run", "manage_consumers")


def shot(page, name: str) -> None:
    shoot(page, f"reads-{name}")


def test_a_manager_deletes_a_consumer_after_confirming(new_page):
    run = Run.objects.create(workflow_name="browser_consumers", workflow_version=1, snapshot={})
    created = [Event.objects.create(run=run, type=f"e{n}") for n in range(4)]
    # The cursor of the second event, made from its row: on PostgreSQL ``consume`` hands
    # out only events below the cluster's visibility horizon, which a long transaction of
    # a test on another worker (another database, the same server) holds back.
    second = Event.objects.get(pk=created[1].pk)
    workflows.create_consumer("billing")
    workflows.ack("billing", encode_cursor(Position(second.xid, second.pk)))
    workflows.create_consumer("stale-reader")
    manager()
    page = new_page()
    sign_in(page, "manager", "/admin/workflows/run/consumers/")

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
