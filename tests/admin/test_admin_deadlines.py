"""Deadlines in the console: the runs list filters by them, the run page shows one with
the time left, the start page takes one, and replay reasons show among refused actions."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.admin.admin_console import checkout, notes, staff
from workflows.models import Run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

RUNS = "admin:workflows_run_changelist"
START = "admin:workflows_run_start"


@pytest.fixture
def viewer(client):
    client.force_login(staff("viewer"))
    return client


def listed(client, **query: str) -> set[Run]:
    page = client.get(reverse(RUNS), query)
    assert page.status_code == 200
    return set(page.context["cl"].result_list)


def test_the_runs_list_filters_runs_near_or_past_their_deadline(viewer):
    soon = workflows.start_run(
        "console_checkout",
        {"order": "D-1", "card": "valid", "parcels": []},
        deadline=timedelta(minutes=30),
    )
    far = checkout(order="D-2")
    Run.objects.filter(pk=far.pk).update(deadline=timezone.now() + timedelta(days=3))
    past = checkout(order="D-3")
    Run.objects.filter(pk=past.pk).update(deadline=timezone.now() - timedelta(minutes=5))
    plain = checkout(order="D-4")

    assert listed(viewer, deadline="hour") == {Run.objects.get(pk=soon.pk), past}
    assert listed(viewer, deadline="day") == {Run.objects.get(pk=soon.pk), past}
    assert listed(viewer, deadline="passed") == {past}
    assert plain not in listed(viewer, deadline="any")
    assert len(listed(viewer, deadline="any")) == 3
    page = viewer.get(reverse(RUNS))
    assert b"Within 1 hour (or overdue)" in page.content


def test_the_run_page_shows_the_deadline_and_the_time_left(viewer):
    run = workflows.start_run(
        "console_checkout",
        {"order": "D-5", "card": "valid", "parcels": [1]},
        deadline=timedelta(hours=3),
    )
    page = viewer.get(reverse("admin:workflows_run_change", args=[run.pk]))
    html = page.content.decode()
    assert 'id="run-deadline"' in html
    assert f"{run.deadline:%Y-%m-%d %H:%M:%S}" in html
    assert "(in 2\xa0hours, 59\xa0minutes)" in html or "(in 3\xa0hours)" in html
    run_pending(until=timezone.now() + timedelta(hours=4))
    html = viewer.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()
    assert "(exceeded: the run failed by it)" in html
    assert "deadline_exceeded" in html


def test_the_start_page_takes_a_deadline(client):
    client.force_login(staff("starter"))
    posted = {
        "workflow": "console_checkout",
        "input": json.dumps({"order": "D-6", "card": "valid", "parcels": []}),
    }
    started = client.post(reverse(START), {**posted, "deadline": "PT2H"})
    assert started.status_code == 302
    run = Run.objects.get()
    assert run.deadline is not None
    refused = client.post(reverse(START), {**posted, "deadline": "whenever"})
    assert refused.status_code == 200
    assert "a deadline is seconds" in refused.context["form"].errors["deadline"][0]
    past = client.post(reverse(START), {**posted, "deadline": "2001-01-01T00:00:00+00:00"})
    assert "is not in the future" in notes(past)[-1]
    assert Run.objects.count() == 1
