"""Run metadata in the console: the title and trigger in the runs list and on the run
page; the dismissed filter (by default, dismissed runs are left out of the list, its
attention filter and the dashboard's counts); Set business key, Dismiss and Undismiss on
the run page, each behind its confirmation page; bulk dismiss."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

import workflows
from tests.admin.admin_console import checkout, fragile, noted, notes, staff
from tests.engine.runs.test_run_metadata import Keyed
from workflows.models import Event, Run

pytestmark = pytest.mark.django_db

LIST = "admin:workflows_run_changelist"


@pytest.fixture
def operator(client):
    client.force_login(staff("operator"))
    return client


def listed(client, query: str = "") -> str:
    response = client.get(reverse(LIST) + query)
    assert response.status_code == 200
    return response.content.decode()


def act(client, run: Run, verb: str, **data):
    return client.post(reverse("admin:workflows_run_act", args=[run.pk, verb]), data)


def test_the_list_shows_the_title_over_the_workflow_and_the_trigger(operator):
    titled = workflows.start_run(Keyed, title="Order 77 for ACME")
    workflows.start_run(Keyed)
    html = listed(operator)
    assert 'Order 77 for ACME<div class="wf-quiet">meta_keyed v1</div>' in html
    assert '<span class="wf-trigger">by Python code</span>' in html
    assert titled.trigger == "code"
    assert "?trigger__exact=api" in html  # the trigger filter offers every surface


def test_dismissed_runs_leave_the_default_list_and_its_attention_filter(operator):
    failed, live = fragile(), checkout()
    assert str(failed.pk) in listed(operator, "?attention=failed")
    assert act(operator, failed, "dismiss").status_code == 302
    assert str(failed.pk) not in listed(operator)
    assert str(live.pk) in listed(operator)
    assert str(failed.pk) not in listed(operator, "?attention=failed")
    assert str(failed.pk) in listed(operator, "?dismissed=yes")
    assert str(live.pk) not in listed(operator, "?dismissed=yes")
    everything = listed(operator, "?dismissed=all")
    assert str(failed.pk) in everything and str(live.pk) in everything


def test_the_dashboard_does_not_count_a_dismissed_run_as_needing_attention(operator):
    failed = fragile()
    dashboard = reverse("admin:workflows_dashboard")
    before = operator.get(dashboard).context["attention"]
    workflows.dismiss_run(failed)
    after = operator.get(dashboard).context["attention"]
    counts = {row["class"]: row["runs"] for row in after}
    assert counts["failed"] == {row["class"]: row["runs"] for row in before}["failed"] - 1


def test_dismiss_is_confirmed_first_then_shown_on_the_run_page_and_taken_back(operator):
    failed = fragile()
    confirm = operator.get(reverse("admin:workflows_run_act", args=[failed.pk, "dismiss"]))
    assert confirm.status_code == 200 and "Dismiss run" in confirm.content.decode()
    assert Run.objects.get(pk=failed.pk).dismissed_at is None
    response = act(operator, failed, "dismiss")
    assert noted(response, "is dismissed")
    page = operator.get(reverse("admin:workflows_run_change", args=[failed.pk])).content.decode()
    assert 'id="run-dismissed"' in page and "by <strong>operator</strong>" in page
    assert 'id="run-trigger">trigger <strong>Python code</strong>' in page
    assert "/act/undismiss/" in page and "/act/dismiss/" not in page
    assert noted(act(operator, failed, "undismiss"), "shown in the lists again")
    assert Run.objects.get(pk=failed.pk).dismissed_at is None


def test_dismiss_of_a_live_run_is_refused_with_the_rule(operator):
    live = checkout()
    response = act(operator, live, "dismiss")
    assert noted(response, "Dismiss run refused: run ")
    assert noted(response, "dismiss needs cancelled, compensated")
    assert Run.objects.get(pk=live.pk).dismissed_at is None


def test_set_business_key_on_the_run_page_and_its_refusal(operator):
    workflows.start_run(Keyed, business_key="ORDER-1")
    run = workflows.start_run(Keyed, title="Shown as a title")
    page = operator.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()
    assert "<h1>Shown as a title · meta_keyed v1" in page
    assert "Set business key" in page
    assert noted(act(operator, run, "business_key", business_key="ORDER-2"), "'ORDER-2'")
    assert Run.objects.get(pk=run.pk).business_key == "ORDER-2"
    refused = act(operator, run, "business_key", business_key="ORDER-1")
    assert noted(refused, "Set business key refused: business key 'ORDER-1' is held")
    assert Run.objects.get(pk=run.pk).business_key == "ORDER-2"


def test_the_viewer_is_not_offered_the_verbs(client):
    failed = fragile()
    client.force_login(staff("viewer"))
    assert act(client, failed, "dismiss").status_code == 403
    assert Run.objects.get(pk=failed.pk).dismissed_at is None


def test_bulk_dismiss_dismisses_the_ended_runs_and_skips_the_live(operator):
    failed, live = fragile(), checkout()
    response = operator.post(
        reverse(LIST),
        {
            "action": "bulk_dismiss",
            admin.helpers.ACTION_CHECKBOX_NAME: [str(failed.pk), str(live.pk)],
            "index": "0",
            "confirm": "yes",
        },
    )
    assert response.status_code == 302
    assert notes(response)[0] == "Bulk dismiss: 2 matched, 1 done, 1 skipped, 0 failed."
    assert Run.objects.get(pk=failed.pk).dismissed_at is not None
    assert Run.objects.get(pk=live.pk).dismissed_at is None
    assert Event.objects.filter(type="run.dismissed").count() == 1
