"""A run whose task's handler awaits a signal: its run page says what it awaits and
until when, offers to send a signal with the awaited names to choose from, and the
Waits page lists it as an ``await``."""

from __future__ import annotations

from html import unescape

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

import workflows
from tests.support.handlers import AWAIT_MAPPING
from workflows import Task, Workflow
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


class Mapped(Workflow):
    name = "console_await_mapping"
    load = Task(AWAIT_MAPPING, awaits=["mapping", "skip"])


def test_the_run_page_says_what_the_handler_awaits_and_offers_the_signal(client):
    client.force_login(User.objects.create_superuser("root"))
    run = workflows.start_run(Mapped)
    run_pending()
    page = unescape(
        client.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()
    )
    assert "Task “load” awaits signal “mapping” or “skip”; times out in" in page
    assert "Send a signal" in page
    form = client.get(reverse("admin:workflows_run_act", args=[run.pk, "signal"]))
    assert '<option value="mapping">' in form.content.decode()
    waits = client.get(reverse("admin:workflows_waits"), {"kind": "await"}).content.decode()
    assert 'class="wait-await"' in waits
    assert "mapping, skip" in waits
