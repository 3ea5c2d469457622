"""The console's Waits page: every wait across runs, its filters and pages, who may see
it, its link on the admin index, and a cost that does not grow with the waits."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.admin.admin_console import checkout, staff
from tests.support.handlers import ASK_BANK
from workflows import Gate, Task, Workflow
from workflows.admin.waits import PAGE_SIZE
from workflows.models import Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

WAITS = "admin:workflows_waits"


class Approval(Workflow):
    name = "console_waits_approval"
    approve = Gate(prompt="Refund order {input[order]}?", timeout=timedelta(hours=4))
    bank = Task(ASK_BANK, after=[])


def approval(order: str) -> workflows.models.Run:
    run = workflows.start_run(Approval, {"order": order}, business_key=order)
    run_pending()
    return run


def test_the_page_lists_each_wait_with_its_run_and_timeout(client):
    client.force_login(staff("viewer"))
    gated = approval("R-1")
    shipping = checkout(order="C-1")
    page = client.get(reverse(WAITS))
    assert page.status_code == 200
    html = page.content.decode()
    assert "<title>Waits |" in html
    assert 'class="wait-gate"' in html and "Refund order R-1?" in html
    assert 'class="wait-signal"' in html and "shipped" in html
    for run in (gated, shipping):
        assert reverse("admin:workflows_run_change", args=[run.pk]) in html
    assert "R-1" in html and "C-1" in html
    assert re.search(r"in 3\xa0hours, 5\d\xa0minutes", html)  # the gate's timeout, 4 hours on
    assert 'id="waits-next"' not in html


def test_filters_by_kind_workflow_and_age(client):
    client.force_login(staff("viewer"))
    gated = approval("R-2")
    checkout(order="C-2")
    only_gates = client.get(reverse(WAITS), {"kind": "gate"}).content.decode()
    assert 'class="wait-gate"' in only_gates and 'class="wait-signal"' not in only_gates
    by_workflow = client.get(reverse(WAITS), {"workflow": "console_checkout"}).content.decode()
    assert 'class="wait-signal"' in by_workflow and 'class="wait-gate"' not in by_workflow
    old = client.get(reverse(WAITS), {"age": "1d"}).content.decode()
    assert 'id="no-waits"' in old and "No wait matches these filters." in old
    Step.objects.filter(run=gated, name="approve").update(
        started_at=timezone.now() - timedelta(days=2)
    )
    assert 'class="wait-gate"' in client.get(reverse(WAITS), {"age": "1d"}).content.decode()
    # Values the page does not offer are ignored, as a changelist ignores them.
    for garbage in (
        {"kind": "nap"},
        {"kind": "held"},
        {"kind": "lease"},
        {"age": "x"},
        {"cursor": "made-up"},
        {"workflow": "\x00"},
    ):
        assert client.get(reverse(WAITS), garbage).status_code == 200


def test_nothing_waiting_says_so(client):
    client.force_login(staff("viewer"))
    assert "Nothing is waiting." in client.get(reverse(WAITS)).content.decode()


def test_the_next_page_link_continues_after_the_first_page(client):
    client.force_login(staff("viewer"))
    for number in range(PAGE_SIZE // 2 + 1):  # two waits each: a gate and a callback
        workflows.start_run(Approval, {"order": f"P-{number}"})
    run_pending()
    first = client.get(reverse(WAITS)).content.decode()
    assert first.count('<tr class="wait-') == PAGE_SIZE
    assert 'id="waits-next"' in first
    link = re.search(r'href="(\?[^"]*cursor=[^"]*)" id="waits-next"', first)
    assert link is not None
    second = client.get(reverse(WAITS) + unescape(link.group(1)))
    assert second.content.decode().count('<tr class="wait-') == 2


@pytest.mark.parametrize("role", ["nobody", "starter"])
def test_who_may_see_the_page(client, role):
    approval("R-3")
    client.force_login(staff(role))
    response = client.get(reverse(WAITS))
    assert response.status_code == (403 if role == "nobody" else 200)
    if role == "nobody":
        assert b"Refund order" not in response.content


def test_anonymous_visitors_are_sent_to_the_login(client):
    response = client.get(reverse(WAITS))
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]


@pytest.mark.parametrize(("role", "sees"), [("nobody", False), ("viewer", True)])
def test_the_admin_index_links_to_the_page_for_viewers(client, role, sees):
    client.force_login(staff(role))
    html = client.get(reverse("admin:index")).content.decode()
    assert (f'href="{reverse(WAITS)}"' in html) is sees


def test_the_page_costs_the_same_for_two_waits_and_for_forty(client):
    client.force_login(staff("viewer"))
    approval("R-4")
    client.get(reverse(WAITS))  # warm: session, permissions, content types
    with CaptureQueriesContext(connection) as few:
        client.get(reverse(WAITS))
    for number in range(20):
        workflows.start_run(Approval, {"order": f"Q-{number}"})
    run_pending()
    with CaptureQueriesContext(connection) as many:
        html = client.get(reverse(WAITS)).content.decode()
    assert html.count('<tr class="wait-') == 42
    assert len(many) == len(few)
