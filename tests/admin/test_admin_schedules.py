"""The schedules of the console: the list (calendar in words, next fire times, counts,
paused with its note), the page of one schedule (runs, events), its four verbs behind
confirmation pages, who may use them, and addresses that name no schedule."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from tests.admin.schedule_samples import Samples, make_samples, runs_of
from tests.support.users import staff as plain_staff
from workflows.models import Event, Run, Schedule
from workflows.services.schedules import next_fire_times

pytestmark = pytest.mark.django_db

EVERYTHING = ("view_run", "view_schedule", "change_schedule", "start_run")
SCHEDULE_PERMISSIONS = ("view_schedule", "change_schedule", "delete_schedule")


def staff(username: str, *codenames: str) -> User:
    """A staff user holding the permissions; a schedule's are this app's (django-q2 has
    a ``Schedule`` model too)."""
    user = plain_staff(username, *(c for c in codenames if c not in SCHEDULE_PERMISSIONS))
    for codename in set(codenames) & set(SCHEDULE_PERMISSIONS):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="workflows", codename=codename)
        )
    return User.objects.get(pk=user.pk)


@pytest.fixture
def samples() -> Samples:
    return make_samples()


@pytest.fixture
def operator(client):
    client.force_login(staff("operator", *EVERYTHING))
    return client


def act(schedule: Schedule, verb: str) -> str:
    return reverse("admin:workflows_schedule_act", args=[schedule.pk, verb])


def page(schedule: Schedule) -> str:
    return reverse("admin:workflows_schedule_change", args=[schedule.pk])


def test_the_list_shows_the_calendar_in_words_the_counts_and_the_note(operator, samples):
    html = operator.get(reverse("admin:workflows_schedule_changelist")).content.decode()
    assert "At 02:00 every day" in html
    assert "every 5 minutes" in html
    assert "every hour" in html
    assert "Supplier API down for maintenance until Monday" in html
    assert "1 fired · 1 skipped · 0 missed" in html
    # The nightly's next slots in the viewer's zone (UTC here) and in Berlin's.
    first = next_fire_times(samples.nightly, 1)[0]
    assert f"{timezone.localtime(first):%d %b %H:%M %Z}" in html
    assert f"· {first.astimezone(ZoneInfo('Europe/Berlin')):%H:%M %Z}" in html
    assert f"{first.astimezone(ZoneInfo('Europe/Berlin')):%H:%M}" == "02:00"
    held_run = samples.held.last_run
    assert held_run is not None
    assert reverse("admin:workflows_run_change", args=[held_run.pk]) in html


def test_the_list_filters_by_paused_and_workflow(operator, samples):
    url = reverse("admin:workflows_schedule_changelist")
    paused = operator.get(url, {"paused__exact": "1"}).content.decode()
    assert "supplier-sync" in paused and "nightly-report" not in paused
    held = operator.get(url, {"workflow_name": "support_held"}).content.decode()
    assert "hourly-approval" in held and "supplier-sync" not in held


def test_the_page_shows_runs_newest_slot_first_and_events(operator, samples):
    html = operator.get(page(samples.held)).content.decode()
    [run] = runs_of(samples.held)
    assert reverse("admin:workflows_run_change", args=[run.pk]) in html
    assert "schedule.fired" in html and "schedule.skipped" in html
    nightly = operator.get(page(samples.nightly)).content.decode()
    runs = runs_of(samples.nightly)
    assert len(runs) == 3
    links = [nightly.index(reverse("admin:workflows_run_change", args=[r.pk])) for r in runs]
    assert links == sorted(links, reverse=True)


def test_the_page_shows_the_input_as_json_and_who_made_it(operator, samples):
    Schedule.objects.filter(pk=samples.nightly.pk).update(input={"to": None})
    html = operator.get(page(samples.nightly)).content.decode()
    assert "<code>{&quot;to&quot;: null}</code>" in html
    assert "made by <strong>" in html
    Schedule.objects.filter(pk=samples.nightly.pk).update(origin="code")
    declared = operator.get(page(samples.nightly)).content.decode()
    assert "declared in the code of <strong>support_work</strong>" in declared


def test_pause_confirms_then_pauses_with_the_note(operator, samples):
    form = operator.get(act(samples.nightly, "pause"))
    assert form.status_code == 200 and b"no slot starts a run" in form.content
    assert not Schedule.objects.get(pk=samples.nightly.pk).paused
    done = operator.post(act(samples.nightly, "pause"), {"note": "data centre move"})
    assert done.status_code == 302 and done["Location"] == page(samples.nightly)
    schedule = Schedule.objects.get(pk=samples.nightly.pk)
    assert (schedule.paused, schedule.note) == (True, "data centre move")
    assert Event.objects.filter(schedule=schedule, type="schedule.paused").exists()


def test_unpause_resumes_and_clears_the_note(operator, samples):
    assert operator.get(act(samples.paused, "unpause")).status_code == 200
    operator.post(act(samples.paused, "unpause"), {})
    schedule = Schedule.objects.get(pk=samples.paused.pk)
    assert (schedule.paused, schedule.note) == (False, "")


def test_trigger_starts_one_run_now(operator, samples):
    assert operator.get(act(samples.paused, "trigger")).status_code == 200
    assert runs_of(samples.paused) == []
    operator.post(act(samples.paused, "trigger"), {})
    [run] = runs_of(samples.paused)
    assert run.scheduled_for is not None


def test_backfill_shows_its_dry_run_then_starts_what_it_said(operator, samples):
    end = timezone.localtime() - timedelta(minutes=1)
    fmt = "%Y-%m-%d %H:%M:%S"
    span = {"start": (end - timedelta(days=5)).strftime(fmt), "end": end.strftime(fmt)}
    preview = operator.post(act(samples.nightly, "backfill"), {**span, "preview": "1"})
    html = preview.content.decode()
    assert "<strong>5</strong> slots" in html
    assert "<strong>2</strong> runs would start" in html
    assert "<strong>3</strong> slots already have a run" in html
    assert len(runs_of(samples.nightly)) == 3
    operator.post(act(samples.nightly, "backfill"), {**span, "confirm": "1"})
    assert len(runs_of(samples.nightly)) == 5
    again = operator.post(act(samples.nightly, "backfill"), {**span, "preview": "1"})
    assert "<strong>0</strong> runs would start" in again.content.decode()


def test_a_backfill_into_the_future_is_refused_on_the_page(operator, samples):
    now = timezone.localtime()
    fmt = "%Y-%m-%d %H:%M:%S"
    span = {"start": now.strftime(fmt), "end": (now + timedelta(days=1)).strftime(fmt)}
    answer = operator.post(act(samples.nightly, "backfill"), {**span, "preview": "1"})
    assert answer.status_code == 200
    assert b"is in the future" in answer.content


def test_pausing_needs_change_schedule(client, samples):
    client.force_login(staff("viewer", "view_schedule", "view_run"))
    assert client.get(page(samples.nightly)).status_code == 200
    assert b"schedule-actions" not in client.get(page(samples.nightly)).content
    assert client.post(act(samples.nightly, "pause"), {"note": ""}).status_code == 403
    assert not Schedule.objects.get(pk=samples.nightly.pk).paused


def test_triggering_and_backfilling_need_start_run_too(client, samples):
    client.force_login(staff("changer", "view_schedule", "change_schedule"))
    html = client.get(page(samples.paused)).content.decode()
    assert "Unpause schedule" in html and "Trigger now" not in html
    assert client.post(act(samples.paused, "trigger"), {}).status_code == 403
    assert client.get(act(samples.paused, "backfill")).status_code == 403
    assert runs_of(samples.paused) == []


@pytest.mark.parametrize("hostile", ["abc", "99999999999999999999999", "0", "1%00", "-1"])
def test_an_address_naming_no_schedule_is_a_404(operator, samples, hostile):
    assert operator.get(f"/admin/workflows/schedule/{hostile}/change/").status_code == 404
    assert operator.get(f"/admin/workflows/schedule/{hostile}/act/pause/").status_code == 404
    assert operator.get(act(samples.nightly, "explode")).status_code == 404


def test_the_runs_list_filters_by_schedule_and_the_run_page_shows_the_slot(operator, samples):
    [held_run] = runs_of(samples.held)
    runs = operator.get(reverse("admin:workflows_run_changelist"), {"schedule": samples.held.pk})
    html = runs.content.decode()
    assert str(held_run.pk)[:8] in html
    assert all(str(r.pk)[:8] not in html for r in runs_of(samples.nightly))
    bad = operator.get(reverse("admin:workflows_run_changelist"), {"schedule": "x'"})
    assert bad.status_code == 302 and "e=1" in bad["Location"]
    run_page = operator.get(reverse("admin:workflows_run_change", args=[held_run.pk]))
    assert 'id="run-slot"' in run_page.content.decode()
    assert page(samples.held) in run_page.content.decode()
    assert Run.objects.filter(schedule__isnull=False).count() == 4


def test_the_console_links_the_schedules_list(operator, samples):
    html = operator.get(reverse("admin:index")).content.decode()
    assert reverse("admin:workflows_schedule_changelist") in html


def test_delete_confirms_then_deletes_and_its_runs_stay(client, samples):
    client.force_login(staff("remover", *EVERYTHING, "delete_schedule"))
    assert b"Delete schedule" in client.get(page(samples.nightly)).content
    form = client.get(act(samples.nightly, "delete"))
    assert form.status_code == 200 and b"its history stay" in form.content
    assert Schedule.objects.filter(pk=samples.nightly.pk).exists()
    runs = [run.pk for run in runs_of(samples.nightly)]
    done = client.post(act(samples.nightly, "delete"), {})
    assert done.status_code == 302
    assert done["Location"] == reverse("admin:workflows_schedule_changelist")
    assert not Schedule.objects.filter(pk=samples.nightly.pk).exists()
    assert Run.objects.filter(pk__in=runs, schedule__isnull=True).count() == len(runs) == 3


def test_delete_needs_the_delete_permission(operator, samples):
    assert b"Delete schedule" not in operator.get(page(samples.nightly)).content
    assert operator.post(act(samples.nightly, "delete"), {}).status_code == 403
    assert Schedule.objects.filter(pk=samples.nightly.pk).exists()
