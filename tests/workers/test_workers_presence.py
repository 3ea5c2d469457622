"""Worker presence: the rows ``workflows_worker`` writes while it runs, the admin's
Workers page that shows them, and the command's refusal of bad options."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.urls import reverse

from workflows.engine.routing import WorkerRoutes
from workflows.models import WorkerPresence
from workflows.queries.workers import MISSED_INTERVALS, is_live, live_workers
from workflows.workers.presence import (
    FORGET_GONE_AFTER,
    forget_gone_workers,
    report_presence,
    withdraw_presence,
)

pytestmark = pytest.mark.django_db


def routes(queues: list[str], capabilities: list[str] = ()) -> WorkerRoutes:
    return WorkerRoutes(frozenset(queues), frozenset(capabilities))


def test_a_report_creates_the_row_then_refreshes_it_keeping_its_start():
    assert report_presence("host:10", routes(["gpu", "default"], ["cuda"]))
    first = WorkerPresence.objects.get(name="host:10")
    assert (first.queues, first.capabilities) == (["default", "gpu"], ["cuda"])
    assert first.started_at == first.seen_at
    WorkerPresence.objects.filter(pk=first.pk).update(seen_at=first.seen_at - timedelta(minutes=1))
    assert report_presence("host:10", routes(["default"]))
    again = WorkerPresence.objects.get(name="host:10")
    assert again.started_at == first.started_at
    assert again.seen_at > first.seen_at - timedelta(minutes=1)
    assert (again.queues, again.capabilities) == (["default"], [])


def test_a_withdrawn_worker_has_no_row():
    report_presence("host:11", routes(["default"]))
    report_presence("host:12", routes(["default"]))
    withdraw_presence("host:11")
    assert list(WorkerPresence.objects.values_list("name", flat=True)) == ["host:12"]


def test_a_worker_is_live_until_it_missed_three_reports():
    report_presence("host:13", routes(["default"]))
    row = WorkerPresence.objects.get()
    # Three default intervals of 10 s, give or take a millisecond (SQLite keeps those).
    gone_at = row.seen_at + MISSED_INTERVALS * timedelta(seconds=10)
    live = gone_at - timedelta(milliseconds=1)
    gone = gone_at + timedelta(milliseconds=1)
    assert is_live(row, live)
    assert list(live_workers(live)) == [row]
    assert not is_live(row, gone)
    assert list(live_workers(gone)) == []


def test_the_workers_page_lists_alive_and_gone_workers_read_only(client):
    client.force_login(User.objects.create_superuser("root"))
    report_presence("gpu-host:41", routes(["default", "gpu"], ["cuda"]))
    report_presence("old-host:7", routes(["default"]))
    gone = WorkerPresence.objects.get(name="old-host:7")
    WorkerPresence.objects.filter(pk=gone.pk).update(seen_at=gone.seen_at - timedelta(hours=2))
    page = client.get(reverse("admin:workflows_workerpresence_changelist"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "<h1>Workers</h1>" in html
    rows = html.split("<tbody>")[1].split("</tbody>")[0].split("</tr>")[:2]
    assert "gpu-host:41" in rows[0] and "default, gpu" in rows[0] and "cuda" in rows[0]
    assert ">alive<" in rows[0]
    assert "old-host:7" in rows[1] and ">gone<" in rows[1] and "2\xa0hours ago" in rows[1]
    assert client.get(reverse("admin:workflows_workerpresence_add")).status_code == 403
    change = reverse("admin:workflows_workerpresence_change", args=[gone.pk])
    assert client.post(change, {"name": "x"}).status_code == 403
    delete = reverse("admin:workflows_workerpresence_delete", args=[gone.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert WorkerPresence.objects.count() == 2


def test_the_workers_page_is_for_those_who_may_view_runs(client):
    report_presence("host:51", routes(["default"]))
    user = User.objects.create_user("viewer", is_staff=True)
    client.force_login(user)
    workers = reverse("admin:workflows_workerpresence_changelist")
    assert client.get(workers).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_run"))
    page = client.get(workers)
    assert page.status_code == 200
    assert "host:51" in page.content.decode()
    assert "&rsaquo; Workers" in page.content.decode()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queues": ["gpu west"]}, "--queue must be 1-60 letters"),
        ({"capabilities": ["cuda!"]}, "--capability must be 1-60 letters"),
        ({"queues": ["x" * 61]}, "--queue must be 1-60 letters"),
    ],
)
def test_the_worker_command_refuses_bad_names_before_starting_anything(options, message):
    with pytest.raises(CommandError, match=message):
        call_command("workflows_worker", **options)
    assert WorkerPresence.objects.count() == 0


def test_the_worker_command_refuses_to_serve_no_queue(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "WORKER_QUEUES": []}
    with pytest.raises(CommandError, match="serves no queue"):
        call_command("workflows_worker")


def test_workers_gone_for_a_day_are_forgotten_recent_ones_kept():
    report_presence("host:20", routes(["default"]))
    report_presence("host:21", routes(["default"]))
    gone = WorkerPresence.objects.get(name="host:20")
    WorkerPresence.objects.filter(pk=gone.pk).update(
        seen_at=gone.seen_at - FORGET_GONE_AFTER - timedelta(minutes=1)
    )
    assert forget_gone_workers() == 1
    assert list(WorkerPresence.objects.values_list("name", flat=True)) == ["host:21"]
