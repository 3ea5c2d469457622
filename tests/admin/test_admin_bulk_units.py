"""The console's "Recover stuck units" page: a filter checked by a dry run that changes
nothing, a confirm button that applies it unit by unit, and who may use it."""

from __future__ import annotations

from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from tests.support.revoke import Wedged, running_load
from tests.support.users import staff
from workflows.models import Event, Step

pytestmark = pytest.mark.django_db

PAGE = "admin:workflows_bulk_units"
FILTER = {"verb": "revoke", "kind": "step", "held_on": "lease", "workflow": Wedged.name}


def test_the_page_checks_the_filter_then_applies_it(client):
    client.force_login(staff("operator", "view_run", "operate_run"))
    steps = [running_load(f"w-{n}")[1] for n in range(2)]
    empty = client.get(reverse(PAGE))
    assert empty.status_code == 200 and 'id="dry-run"' not in empty.content.decode()
    events = Event.objects.count()
    checked = client.get(reverse(PAGE), FILTER)
    html = unescape(checked.content.decode())
    assert checked.status_code == 200
    assert "<strong>2</strong>eligible" in html
    assert f"step {steps[0].pk}" in html and "csrfmiddlewaretoken" in html
    assert '<input type="hidden" name="held_on" value="lease">' in html
    assert Event.objects.count() == events  # the dry run wrote nothing
    applied = client.post(reverse(PAGE), {**FILTER, "reason": "wedged", "confirm": "yes"})
    assert applied.status_code == 302
    assert {Step.objects.get(pk=step.pk).status for step in steps} == {"ready"}
    after = client.get(applied["Location"])
    text = unescape(after.content.decode())
    assert "Bulk revoke of steps: 2 matched, 2 done, 0 skipped, 0 failed." in text
    assert "<strong>0</strong>matched" in text  # nothing left running


def test_a_refused_filter_is_a_message_and_nothing_changes(client):
    client.force_login(staff("operator", "view_run", "operate_run"))
    running_load("w-1")
    page = client.get(reverse(PAGE), {"verb": "retry_step", "kind": "item"})
    assert "retry_step does not apply to items" in unescape(page.content.decode())
    posted = client.post(reverse(PAGE), {"verb": "retry_step", "kind": "item", "confirm": "yes"})
    assert posted.status_code == 302
    assert Step.objects.get().status == "running"


def test_a_bad_value_is_an_error_on_its_field(client):
    client.force_login(staff("operator", "view_run", "operate_run"))
    page = client.get(reverse(PAGE), {"verb": "revoke", "kind": "run", "older_than": "2y"})
    assert page.status_code == 200
    assert set(page.context["form"].errors) == {"kind", "older_than"}


def test_a_viewer_may_not_open_or_post_it(client):
    client.force_login(staff("viewer", "view_run"))
    running_load("w-1")
    assert client.get(reverse(PAGE), FILTER).status_code == 403
    assert client.post(reverse(PAGE), {**FILTER, "confirm": "yes"}).status_code == 403
    assert Step.objects.get().status == "running"
    index = client.get(reverse("admin:index")).content.decode()
    assert "Recover stuck units" not in index


def test_the_console_links_it_for_operators(client):
    client.force_login(staff("operator", "view_run", "operate_run"))
    index = client.get(reverse("admin:index")).content.decode()
    assert f'href="{reverse(PAGE)}">Recover stuck units' in index


def test_the_apply_needs_the_pages_csrf_token():
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff("operator", "view_run", "operate_run"))
    running_load("w-1")
    assert client.post(reverse(PAGE), {**FILTER, "confirm": "yes"}).status_code == 403
    assert Step.objects.get().status == "running"
