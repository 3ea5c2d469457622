"""Every surface that starts a run says so in ``Run.trigger`` (and who, when someone
signed in did): Python code, the API, the console's start form, the command, a
schedule, a flow and a parent run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import workflows
from tests.admin.admin_console import staff
from tests.engine.runs.test_run_metadata import Parent, Waits
from workflows.models import Run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def newest() -> Run:
    return Run.objects.select_related("created_by").order_by("-created_at", "-id").first()


def who(run: Run) -> str | None:
    return run.created_by.get_username() if run.created_by else None


def test_python_code():
    run = workflows.start_run(Waits)
    assert (run.trigger, who(run)) == ("code", None)


def test_the_api():
    user = staff("starter")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    assert client.post("/api/runs/", {"workflow": "meta_waits"}, format="json").status_code == 201
    assert (newest().trigger, who(newest())) == ("api", user.username)


def test_the_console_start_form(client):
    user = staff("starter")
    client.force_login(user)
    response = client.post(
        reverse("admin:workflows_run_start"),
        {"workflow": "meta_waits", "input": "{}", "title": "By hand"},
    )
    assert response.status_code == 302, response.content
    run = newest()
    assert (run.trigger, who(run), run.title) == ("admin", user.username, "By hand")


def test_the_command():
    call_command("workflows_start", "meta_waits", "--input", "{}", "--title", "From the shell")
    assert (newest().trigger, newest().title) == ("command", "From the shell")


def test_a_schedule():
    workflows.create_schedule(Waits, key="meta-hourly", every=timedelta(hours=1))
    run = workflows.trigger_schedule("meta-hourly")
    assert run.trigger == "schedule"


def test_a_flow():
    flow = workflows.create_flow("meta")
    run = workflows.add_to_flow(flow, Waits, {}, member="one")
    assert Run.objects.get(pk=run.pk).trigger == "flow"


def test_a_parent_run():
    parent = workflows.start_run(Parent)
    run_pending()
    assert Run.objects.get(parent_run=parent).trigger == "child"
