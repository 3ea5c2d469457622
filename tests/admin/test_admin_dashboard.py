"""The console's dashboard: counts, the 24-hour chart, attention, gates, worker health."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.admin.admin_console import checkout, failed_checkout, fragile, staff
from workflows.admin.dashboard import Hour, hourly_chart
from workflows.models import Run, Step

pytestmark = pytest.mark.django_db

DASHBOARD = "admin:workflows_dashboard"


def test_the_dashboard_counts_runs_and_links_to_the_filtered_list(client):
    client.force_login(staff("viewer"))
    checkout(order="D-1")
    failed_checkout(order="D-2")
    fragile()
    page = client.get(reverse(DASHBOARD))
    assert page.status_code == 200
    html = page.content.decode()
    runs = reverse("admin:workflows_run_changelist")
    assert "Runs not over (1)" in html
    assert "Runs ended in the last 24 hours (2)" in html
    assert f"{runs}?status__exact=waiting" in html
    assert f"{runs}?attention=failed" in html
    assert '<svg class="wf-chart"' in html
    assert "3 started" in html
    assert "0 completed, 2 failed" in html  # compensated and failed both count as failed
    assert "console_checkout" in html
    assert "Expired leases not reclaimed" in html
    assert "Queue (django-q2, ORM broker)" in html
    assert " message" in html  # the ORM queue's depth is read and shown


def test_on_redis_the_dashboard_names_the_broker_and_where_its_depth_is_shown(client, settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "redis": "redis://localhost:6379/0"}
    settings.Q_CLUSTER.pop("orm", None)
    client.force_login(staff("viewer"))
    html = client.get(reverse(DASHBOARD)).content.decode()
    assert "Queue (django-q2, Redis broker)" in html
    assert "the Redis broker keeps the queue outside the database" in html
    assert "manage.py qinfo" in html
    assert "not the ORM broker" not in html


def test_worker_health_shows_expired_leases_and_the_last_sweep(client):
    client.force_login(staff("viewer"))
    run = checkout(order="D-1")
    Step.objects.filter(run=run, name="reserve").update(
        status="running", lease_expires_at=timezone.now() - timedelta(minutes=5)
    )
    html = client.get(reverse(DASHBOARD)).content.decode()
    assert "1 — is a sweeper running?" in html


def test_the_chart_scales_bars_to_the_busiest_hour():
    start = timezone.now().replace(minute=0, second=0, microsecond=0)
    svg = hourly_chart([Hour(start, 4, 2, 0), Hour(start + timedelta(hours=1), 0, 0, 1)])
    assert svg.count('<rect class="bar') == 6
    assert ">4</text>" in svg  # the peak is the scale's top label


def test_only_viewers_see_the_dashboard(client):
    client.force_login(staff("nobody"))
    assert client.get(reverse(DASHBOARD)).status_code == 403


def test_the_dashboard_counts_live_runs_of_any_age_and_ended_runs_of_the_last_day(client):
    client.force_login(staff("viewer"))
    old = timezone.now() - timedelta(days=3)
    waiting = checkout(order="D-1")
    Run.objects.filter(pk=waiting.pk).update(created_at=old)  # live: counted, however old
    recent = fragile()  # failed just now: counted
    long_ago = fragile()
    Run.objects.filter(pk=long_ago.pk).update(created_at=old, finished_at=old)  # not counted
    html = client.get(reverse(DASHBOARD)).content.decode()
    assert "Runs not over (1)" in html
    assert "Runs ended in the last 24 hours (1)" in html
    # The ended tile links to the list over the same window: it shows the run counted.
    link = re.search(r'href="([^"]*status__exact=failed[^"]*)"', html)
    assert link is not None and "finished_at__gte=" in link.group(1)
    listed = client.get(unescape(link.group(1))).content.decode()
    assert str(recent.pk) in listed and str(long_ago.pk) not in listed
