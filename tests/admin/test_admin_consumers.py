"""The console's Event consumers page and the consumer-lag metric: each consumer with
its position, its lag (events it has yet to acknowledge) and its last ack."""

from __future__ import annotations

from html import unescape

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import workflows
from tests.admin.admin_console import notes, staff
from tests.metrics.test_metrics import ENABLED, scrape
from workflows.models import Event, EventConsumer, Run

pytestmark = pytest.mark.django_db

CONSUMERS = "admin:workflows_consumers"
DELETE = "admin:workflows_consumer_delete"


def _events(count: int) -> list[int]:
    run = Run.objects.create(workflow_name="consumer_page", workflow_version=1, snapshot={})
    return [Event.objects.create(run=run, type=f"e{n}").pk for n in range(count)]


def _consumers() -> None:
    """``billing`` acknowledged two of five events, ``audit`` none."""
    _events(5)
    events = workflows.consume("billing")
    workflows.ack("billing", events[1].cursor)
    workflows.consume("audit")
    workflows.consume("<b>odd</b>")


def test_the_page_lists_each_consumer_with_its_lag_and_last_ack(client):
    _consumers()
    client.force_login(staff("viewer"))
    response = client.get(reverse(CONSUMERS))
    assert response.status_code == 200
    page = unescape(response.content.decode())
    assert "audit" in page and "5 events" in page and "never" in page
    # Acknowledged a moment ago: "just now", never "0 minutes ago".
    assert "billing" in page and "3 events" in page and "just now" in page
    assert "0\xa0minutes" not in page
    assert "<b>odd</b>" not in response.content.decode()  # escaped


def test_the_page_shows_what_a_filtered_consumer_reads_and_its_lag_of_those(client):
    run = Run.objects.create(workflow_name="billing", workflow_version=1, snapshot={})
    Event.objects.create(run=run, type="run.failed")
    Event.objects.create(run=run, type="step.completed")
    workflows.create_consumer("failures", workflows=["billing"], kinds=["run.failed"])
    workflows.create_consumer("all")
    client.force_login(staff("viewer"))
    page = unescape(client.get(reverse(CONSUMERS)).content.decode())
    assert "workflows <code>billing</code>" in page and "types <code>run.failed</code>" in page
    assert "1 event<" in page and "2 events" in page and "every event" in page


def test_the_page_without_consumers_says_how_one_starts(client):
    client.force_login(staff("viewer"))
    response = client.get(reverse(CONSUMERS))
    assert "No consumer yet" in response.content.decode()


def test_the_page_costs_the_same_whatever_the_number_of_consumers(client):
    client.force_login(staff("viewer"))
    _events(3)
    workflows.consume("one")
    with CaptureQueriesContext(connection) as few:
        client.get(reverse(CONSUMERS))
    for name in ("two", "three", "four"):
        workflows.consume(name)
    workflows.create_consumer("filtered", workflows=["consumer_page"], kinds=["run.failed"])
    with CaptureQueriesContext(connection) as more:
        client.get(reverse(CONSUMERS))
    assert len(more) == len(few)


def test_viewing_needs_the_view_permission_and_the_index_links_it(client):
    client.force_login(staff("nobody"))
    assert client.get(reverse(CONSUMERS)).status_code == 403
    client.force_login(staff("viewer"))
    assert reverse(CONSUMERS) in client.get(reverse("admin:index")).content.decode()


@override_settings(WORKFLOWS=ENABLED)
def test_the_metric_gives_each_consumers_lag(client):
    _consumers()
    lags = {
        dict(labels)["consumer"]: value
        for (name, labels), value in scrape(client).items()
        if name == "flowsite_event_consumer_lag"
    }
    assert lags == {"billing": 3, "audit": 5, "<b>odd</b>": 5}


def test_a_manager_deletes_a_consumer_after_confirming(client):
    _consumers()
    client.force_login(staff("manager"))
    page = client.get(reverse(CONSUMERS)).content.decode()
    link = f"{reverse(DELETE)}?name=%3Cb%3Eodd%3C%2Fb%3E"
    assert unescape(link) in unescape(page)
    confirm = client.get(link)
    assert confirm.status_code == 200
    assert "3 events" not in unescape(confirm.content.decode())
    assert "5 events not yet acknowledged" in unescape(confirm.content.decode())
    assert EventConsumer.objects.filter(name="<b>odd</b>").exists()  # a GET deletes nothing
    done = client.post(reverse(DELETE), {"name": "<b>odd</b>"})
    assert done.status_code == 302 and done["Location"] == reverse(CONSUMERS)
    assert notes(done) == ["Consumer “<b>odd</b>” deleted."]
    assert sorted(EventConsumer.objects.values_list("name", flat=True)) == ["audit", "billing"]
    again = client.post(reverse(DELETE), {"name": "<b>odd</b>"})
    assert notes(again)[-1] == (
        "Deleting the consumer refused: no event consumer is named '<b>odd</b>'. Nothing changed."
    )


def test_deleting_needs_the_permission_to_manage_consumers(client):
    _consumers()
    client.force_login(staff("operator"))
    assert "Delete" not in client.get(reverse(CONSUMERS)).content.decode()
    assert client.get(f"{reverse(DELETE)}?name=audit").status_code == 403
    assert client.post(reverse(DELETE), {"name": "audit"}).status_code == 403
    assert EventConsumer.objects.filter(name="audit").exists()
