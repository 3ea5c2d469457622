"""The runs list and the run page of the operator console: what they show, who sees them,
and that they cost a fixed number of queries whatever the run's size."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import workflows
from tests.admin.admin_console import checkout, failed_checkout, staff
from workflows.admin.graph import GraphStep, layout
from workflows.admin.runs import (
    COUNT_CAP,
    BoundedCountPaginator,
    id_prefix_range,
    key_or_its_start,
)
from workflows.models import Run

pytestmark = pytest.mark.django_db

RUNS = "admin:workflows_run_changelist"


def run_url(run: Run) -> str:
    return reverse("admin:workflows_run_change", args=[run.pk])


@pytest.fixture
def viewer(client):
    client.force_login(staff("viewer"))
    return client


@pytest.fixture
def operator(client):
    client.force_login(staff("operator"))
    return client


# -- the runs list -------------------------------------------------------------------


def test_the_list_shows_short_ids_badges_progress_and_attention(viewer):
    waiting = checkout(order="C-1")
    failed = failed_checkout(order="C-2")
    page = viewer.get(reverse(RUNS))
    assert page.status_code == 200
    html = page.content.decode()
    short = str(waiting.pk)[:8]
    assert f'<span class="wf-id" title="{waiting.pk}">{short}</span>' in html
    assert 'class="wf-badge st-waiting"' in html
    assert f'class="wf-badge st-{failed.status}"' in html
    assert "console_checkout v1" in html
    assert "2/4" in html  # reserve and pack done of four steps
    assert "C-2" in html


def test_the_attention_filter_agrees_with_the_attention_column(viewer):
    ok = checkout(order="C-1")
    failed = failed_checkout(order="C-2")
    assert failed.status == "compensated"
    terminated = checkout(order="C-3")
    workflows.terminate_run(terminated, reason="duplicate order")
    page = viewer.get(reverse(RUNS), {"attention": "ok"})
    html = page.content.decode()
    assert str(ok.pk)[:8] in html
    assert str(terminated.pk)[:8] in html  # terminated on purpose needs no one
    assert str(failed.pk)[:8] in html  # compensated cleanly: no attention either


def test_search_finds_a_run_by_id_prefix_or_business_key(viewer):
    first = checkout(order="ORDER-17")
    second = checkout(order="OTHER-2")
    by_prefix = viewer.get(reverse(RUNS), {"q": str(first.pk)[:6]}).content.decode()
    assert str(first.pk)[:8] in by_prefix
    assert str(second.pk)[:8] not in by_prefix or str(second.pk)[:6] == str(first.pk)[:6]
    by_key = viewer.get(reverse(RUNS), {"q": "OTHER"}).content.decode()
    assert str(second.pk)[:8] in by_key
    assert str(first.pk)[:8] not in by_key


@pytest.mark.django_db
def test_a_key_search_finds_the_key_and_the_keys_it_starts_and_no_other():
    for key in ["BK-4", "BK-41", "BK-4z", "BK-5", "BK-3", "bk-4", "BK-", "XBK-4"]:
        checkout(order=key, advance=False)
    found = Run.objects.filter(key_or_its_start("BK-4")).values_list("business_key", flat=True)
    assert sorted(found) == ["BK-4", "BK-41", "BK-4z"]


def test_an_id_prefix_is_a_primary_key_range():
    assert id_prefix_range("not hex") is None
    assert id_prefix_range("AB-12") is not None


def test_the_list_filters_by_status_workflow_and_created_date(viewer):
    checkout()
    for query in (
        {"status__exact": "waiting"},
        {"workflow": "console_checkout"},
        {"created_at__gte": "2000-01-01 00:00:00+00:00"},
    ):
        page = viewer.get(reverse(RUNS), query)
        assert page.status_code == 200
        assert b"console_checkout v1" in page.content


def test_a_sorted_list_breaks_ties_in_the_sorts_direction(viewer):
    """Sorted by workflow, one workflow's runs come oldest first under an ascending sort
    and newest first under a descending one (one index serves both); unsorted, newest
    first."""
    runs = [checkout(order=f"S-{n}", advance=False) for n in range(3)]
    oldest_first = [run.business_key for run in sorted(runs, key=lambda r: (r.created_at, r.pk))]
    for query, expected in (
        ({"o": "3"}, oldest_first),
        ({"o": "-3"}, oldest_first[::-1]),
        ({}, oldest_first[::-1]),
    ):
        page = viewer.get(reverse(RUNS), query)
        assert [run.business_key for run in page.context["cl"].result_list] == expected


def test_the_paginator_stops_counting_at_its_cap(monkeypatch):
    monkeypatch.setattr("workflows.admin.runs.COUNT_CAP", 2)
    for order in ("A", "B", "C"):
        checkout(order=order, advance=False)
    paginator = BoundedCountPaginator(Run.objects.order_by("pk"), 50)
    assert paginator.count == 2
    assert paginator.capped
    assert COUNT_CAP == 10_000


def test_nobody_without_view_permission_sees_the_list(client):
    client.force_login(staff("nobody"))
    assert client.get(reverse(RUNS)).status_code == 403


# -- the run page --------------------------------------------------------------------


def test_the_run_page_tells_a_waiting_runs_story(viewer):
    run = checkout()
    page = viewer.get(run_url(run))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'class="wf-badge st-waiting"' in html
    assert "waits for signal “shipped”" in html
    assert '<svg class="wf-graph"' in html
    for name, status in (("reserve", "completed"), ("pack", "completed"), ("shipped", "waiting")):
        assert f'<a href="#step-{name}" class="wf-node st-{status}">' in html
    assert 'id="step-charge"' in html
    assert "3 of 3 items done" in html or "Fan-outs" in html
    assert "run.started" in html
    # A viewer gets no buttons: each action is listed with the permission it needs.
    assert (
        "<strong>Cancel</strong>: operating runs needs the permission workflows.operate_run" in html
    )
    assert reverse("admin:workflows_run_act", args=[run.pk, "cancel"]) not in html


def test_the_run_page_of_a_failed_run_shows_the_traceback_and_compensation(viewer):
    run = failed_checkout()
    html = viewer.get(run_url(run)).content.decode()
    assert 'class="wf-badge st-compensated"' in html
    assert "card declined by the bank" in html
    assert "<details><summary>Traceback</summary><pre>Traceback" in html
    assert "Compensations" in html
    assert f"{__name__.split('.')[0]}.admin.admin_console.release" in html


def test_the_history_pages_and_filters_to_failures(viewer):
    run = failed_checkout()
    everything = viewer.get(run_url(run)).content.decode()
    assert "run.started" in everything
    failures = viewer.get(run_url(run), {"events": "failed"}).content.decode()
    assert "step.failed" in failures
    assert "<code>run.started</code>" not in failures


def test_an_operator_sees_buttons_for_the_allowed_verbs_and_reasons_for_the_others(operator):
    run = checkout()
    html = operator.get(run_url(run)).content.decode()
    assert reverse("admin:workflows_run_act", args=[run.pk, "cancel"]) in html
    assert reverse("admin:workflows_run_act", args=[run.pk, "pause"]) in html
    assert reverse("admin:workflows_run_act", args=[run.pk, "signal"]) in html
    assert "run is waiting; resume needs paused" in html


def test_an_unknown_run_redirects_with_a_message(viewer):
    response = viewer.get(reverse("admin:workflows_run_change", args=["nope"]), follow=True)
    assert response.status_code == 200
    assert b"doesn" in response.content


def test_the_run_page_costs_the_same_queries_for_a_small_and_a_large_run(viewer):
    small = workflows.start_run(
        "console_checkout", {"order": "S", "parcels": [1]}, business_key="S"
    )
    large = workflows.start_run(
        "console_checkout", {"order": "L", "parcels": list(range(60))}, business_key="L"
    )
    from workflows.testing import run_pending

    run_pending()
    viewer.get(run_url(small))  # warm caches (content types, permissions)
    counts = []
    for run in (small, large):
        with CaptureQueriesContext(connection) as queries:
            assert viewer.get(run_url(run)).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


# -- the graph layout ----------------------------------------------------------------


def test_the_layout_puts_each_step_right_of_its_upstreams():
    steps = [
        GraphStep("a", (), "task", False),
        GraphStep("b", ("a",), "task", False),
        GraphStep("c", ("a",), "task", False),
        GraphStep("d", ("b", "c"), "task", False),
    ]
    placed = {place.step.name: place for place in layout(steps)}
    assert [placed[name].column for name in "abcd"] == [0, 1, 1, 2]
    assert placed["b"].row != placed["c"].row
    assert placed["d"].x > placed["b"].x > placed["a"].x
