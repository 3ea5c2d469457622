"""Counts in the console read as English: "1 run", "2 runs", never "1 runs"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.admin.admin_console import Checkout, checkout, failed_checkout, notes, staff
from workflows.admin.approvals import summarise_input
from workflows.admin.run_page import hold_text
from workflows.queries.explain import WaitingOn
from workflows.testing import run_pending
from workflows.text import relative

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("total", "expected"),
    [(1, "0 of 1 item done"), (3, "0 of 3 items done")],
)
def test_a_fanout_hold_counts_its_items(total, expected):
    entry = WaitingOn(
        "fanout", "pack", {"done": 0, "total": total, "failed": 0, "running": 1, "pending": 0}
    )
    assert expected in hold_text(entry, timezone.now())


def test_the_inbox_summary_and_a_workers_report_count_in_words():
    assert summarise_input({"parcels": [1]}) == "parcels: [1 item]"
    assert summarise_input({"parcels": [1, 2]}) == "parcels: [2 items]"
    now = timezone.now()
    assert relative(now - timedelta(seconds=61), now) == "1\xa0minute, 1\xa0second ago"
    assert relative(now - timedelta(seconds=5), now) == "5\xa0seconds ago"


def test_a_bulk_action_counts_one_skipped_run_as_one_run(client, monkeypatch):
    monkeypatch.setattr("workflows.admin.actions.SKIPPED_SHOWN", 0)  # counted, not listed
    client.force_login(staff("operator"))
    runs = [checkout(order="P-1"), failed_checkout("P-2")]
    response = client.post(
        reverse("admin:workflows_run_changelist"),
        {
            "action": "bulk_cancel",
            admin.helpers.ACTION_CHECKBOX_NAME: [str(run.pk) for run in runs],
            "index": "0",
            "confirm": "yes",
            "compensate": "on",
        },
    )
    skipped = [note for note in notes(response) if ": " in note and note[0].isdigit()]
    assert skipped and all(note.startswith("1 more run: ") for note in skipped), notes(response)


def test_the_run_page_and_the_dashboard_count_in_words(client, monkeypatch):
    client.force_login(staff("viewer"))
    run = workflows.start_run(Checkout, {"order": "P-3", "card": "valid", "parcels": [1]})
    run_pending()
    page = client.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()
    assert "1 of 1 item done" in page
    monkeypatch.setattr("workflows.admin.dashboard._queue_depth", lambda: (1, 1))
    dashboard = client.get(reverse("admin:workflows_dashboard")).content.decode()
    assert "1 message, 1 taken by workers" in dashboard
