"""Bulk priority in the runs list: the action asks for the priority, shows which of the
selected runs take it, sets it through the service the single verb calls, and reports
each run it refused with the reason; bad input is an error on the field."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from tests.admin.admin_console import checkout, failed_checkout, notes, staff
from workflows.engine.guards import PRIORITY
from workflows.models import Event, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    client.force_login(staff("operator"))
    return client


@pytest.fixture
def runs() -> list[Run]:
    """Two waiting runs and one that ended (compensated), which refuses a priority."""
    return [checkout(order="B-1"), checkout(order="B-2"), failed_checkout("B-3")]


def bulk_priority(client, runs: list[Run], **extra):
    data = {
        "action": "bulk_priority",
        admin.helpers.ACTION_CHECKBOX_NAME: [str(run.pk) for run in runs],
        "index": "0",
        **extra,
    }
    return client.post(reverse("admin:workflows_run_changelist"), data)


def priorities(runs: list[Run]) -> list[int]:
    return [Run.objects.get(pk=run.pk).priority for run in runs]


def test_the_action_is_offered_to_operators_only(client):
    checkout()
    client.force_login(staff("viewer"))
    viewed = client.get(reverse("admin:workflows_run_changelist")).content.decode()
    assert 'value="bulk_priority"' not in viewed and "Set the priority" not in viewed
    client.force_login(staff("operator"))
    listed = client.get(reverse("admin:workflows_run_changelist")).content.decode()
    assert 'value="bulk_priority"' in listed and "Set the priority of selected runs…" in listed


def test_it_asks_for_the_priority_then_shows_which_runs_take_it(operator, runs):
    page = bulk_priority(operator, runs)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Give the priority to see which runs take it." in html
    assert 'name="priority"' in html and 'id="dry-run"' not in html
    checked = bulk_priority(operator, runs, priority="50", preview="yes").content.decode()
    assert "<strong>3</strong>matched" in checked
    assert "<strong>2</strong>eligible" in checked
    assert "run is compensated; priority needs" in checked
    assert 'value="50"' in checked  # what was typed stays
    assert priorities(runs) == [0, 0, 0]


def test_confirmed_it_sets_the_priority_and_reports_each_refused_run(operator, runs):
    response = bulk_priority(operator, runs, priority="50", confirm="yes")
    assert response.status_code == 302
    ended = runs[2]
    assert notes(response) == [
        "Bulk priority: 3 matched, 2 done, 1 skipped, 0 failed.",
        f"Run {str(ended.pk)[:8]} (compensated) skipped: {PRIORITY.refusal('compensated')}",
    ]
    assert priorities(runs) == [50, 50, 0]
    changed = Event.objects.get(run=runs[0], type="run.priority_changed")
    assert changed.payload["by"] == "operator"


@pytest.mark.parametrize(
    ("typed", "error"),
    [
        ("soon", "Enter a whole number."),
        ("5000", "Ensure this value is less than or equal to 1000."),
        ("", "This field is required."),
    ],
)
def test_a_bad_priority_is_an_error_on_its_field(operator, runs, typed, error):
    response = bulk_priority(operator, runs, priority=typed, confirm="yes")
    assert response.status_code == 200
    assert response.context["form"].errors == {"priority": [error]}
    assert priorities(runs) == [0, 0, 0]


def test_runs_past_the_listed_ones_are_counted_by_reason(operator, runs, monkeypatch):
    monkeypatch.setattr("workflows.admin.actions.SKIPPED_SHOWN", 0)
    response = bulk_priority(operator, runs, priority="5", confirm="yes")
    assert notes(response)[1:] == [f"1 more run: {PRIORITY.refusal('compensated')}"]
