"""The live endpoints of the run page and the flow page (workflows.admin.live.pages):
checked as the pages are, silent while nothing moved, and when something did, the
regions' markup exactly as the page renders it. And what a cancelling run says about
the step it asked to stop."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.admin.admin_console import checkout, staff
from tests.support.live_rows import Export, report, running_step
from tests.support.workflows import Unit
from workflows.admin.live.regions import FLOW_REGIONS, RUN_REGIONS
from workflows.engine import claim_step
from workflows.models import Run

pytestmark = pytest.mark.django_db


def page_regions(html: str) -> dict[str, str]:
    """Each live region's markup as the page has it: what its wrapper holds."""
    found = {}
    for opener in re.finditer(r'<div id="region-(\w+)" data-live-region="\1">', html):
        depth, start = 0, opener.end()
        for tag in re.finditer(r"<(/?)div\b", html[start:]):
            depth += -1 if tag[1] else 1
            if depth < 0:
                found[opener[1]] = html[start : start + tag.start()]
                break
    return found


def live(client, run: Run, fingerprint: str = ""):
    url = reverse("admin:workflows_run_live", args=[run.pk])
    return client.get(url, {"fingerprint": fingerprint})


def test_a_user_who_may_not_view_runs_gets_no_data(client):
    run = checkout()
    response = live(client, run)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]

    client.force_login(staff("nobody"))
    response = live(client, run)
    assert response.status_code == 403
    assert b"fingerprint" not in response.content and b"region" not in response.content

    client.force_login(staff("viewer"))
    assert live(client, run).status_code == 200
    missing = reverse("admin:workflows_run_live", args=["0" * 32])
    assert client.get(missing).status_code == 404


def test_the_page_and_the_endpoint_render_the_same_regions(client, monkeypatch):
    client.force_login(staff("operator"))
    step = running_step()
    report(step, 3, 10, "importing row 3 of 10")
    moment = timezone.now()  # both render at one moment: durations and "ago" agree
    monkeypatch.setattr(timezone, "now", lambda: moment)
    run = Run.objects.get(pk=step.run_id)

    html = client.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()
    answer = live(client, run).json()

    shown = page_regions(html)
    assert list(shown) == list(RUN_REGIONS)
    assert answer["regions"] == shown
    assert answer["final"] is False
    assert f'data-fingerprint="{answer["fingerprint"]}"' in html
    assert "3 of 10 (30%)" in answer["regions"]["live"]


def test_an_unchanged_run_costs_one_query_and_answers_no_regions(client, django_assert_num_queries):
    user = staff("viewer")
    client.force_login(user)
    run = checkout()
    fingerprint = live(client, run).json()["fingerprint"]

    # The session, its user, the user's permissions and groups' permissions, then the
    # run with its steps' marks.
    with django_assert_num_queries(5):
        answer = live(client, run, fingerprint).json()

    assert answer == {"fingerprint": fingerprint, "final": False}


def test_a_step_that_starts_changes_the_fingerprint_and_brings_its_block(client):
    client.force_login(staff("viewer"))
    run = workflows.start_run(Export, {"rows": 10})
    before = live(client, run).json()
    assert 'id="live"' not in before["regions"]["live"]

    step = run.steps.get(name="export")
    claim_step(step.pk, "worker-9")
    after = live(client, run, before["fingerprint"]).json()

    assert after["fingerprint"] != before["fingerprint"]
    assert f'id="live-{step.pk}"' in after["regions"]["live"]
    assert "worker-9" in after["regions"]["live"]
    assert 'class="wf-badge st-running">running</span>' in after["regions"]["steps"]


def test_a_run_that_ended_says_final(client):
    client.force_login(staff("operator"))
    run = checkout()
    workflows.terminate_run(run, reason="done with it")

    answer = live(client, run, "stale").json()

    assert answer["final"] is True
    assert "terminated" in answer["regions"]["head"]
    html = client.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()
    assert "data-live-url" not in html  # an ended run's page does not ask


# A moment or a span as workflows.text says them: "just now", "2\xa0minutes ago",
# "4\xa0minutes, 59\xa0seconds".
SPAN = r"\d+\xa0[a-z]+(?:, \d+\xa0[a-z]+)?"
AGO = rf"(?:just now|{SPAN} ago)"


def test_a_cancelling_run_says_its_running_step_stops_at_its_next_heartbeat(client):
    client.force_login(staff("viewer"))
    step = running_step("worker-7")
    workflows.cancel_run(step.run_id, reason="not needed")

    html = client.get(reverse("admin:workflows_run_change", args=[step.run_id])).content.decode()

    assert Run.objects.get(pk=step.run_id).status == "cancelling"
    said = re.search(r"<li>(Cancel requested [^<]*)</li>", html)
    assert said, "the Waiting on block says the cancel"
    assert re.fullmatch(
        rf"Cancel requested {AGO}; step “export” stops at its next heartbeat "
        rf"\(worker worker-7, attempt 1 of 3; last heartbeat {AGO}, lease until in {SPAN}\)",
        said[1],
    ), said[1]
    assert "Worker worker-7 runs" not in html
    block = html[html.index(f'id="live-{step.pk}"') :]
    assert "cancel requested</span>" in block[: block.index("live-progress")]
    assert said[1] in block[: block.index("live-progress")]


def test_a_running_step_of_a_run_not_cancelled_says_its_worker_runs_it(client):
    client.force_login(staff("viewer"))
    step = running_step("worker-7")

    html = client.get(reverse("admin:workflows_run_change", args=[step.run_id])).content.decode()

    assert "<li>Worker worker-7 runs step “export” (attempt 1 of 3), lease until in " in html
    assert "Cancel requested" not in html


def test_the_flow_endpoint_follows_its_members_statuses(client, django_assert_num_queries):
    client.force_login(staff("viewer"))
    flow = workflows.create_flow("nightly")
    build = workflows.add_to_flow(flow, Unit, {}, member="build")
    workflows.add_to_flow(flow, Unit, {}, member="test", after=("build",))
    url = reverse("admin:workflows_flow_live", args=[flow.pk])
    page = client.get(reverse("admin:workflows_flow_change", args=[flow.pk])).content.decode()
    first = client.get(url).json()
    assert list(first["regions"]) == list(FLOW_REGIONS)
    assert f'data-fingerprint="{first["fingerprint"]}"' in page

    with django_assert_num_queries(6):  # session, user, 2 permissions, flow, statuses
        assert "regions" not in client.get(url, {"fingerprint": first["fingerprint"]}).json()

    workflows.cancel_run(build, reason="broken")
    moved = client.get(url, {"fingerprint": first["fingerprint"]}).json()
    assert moved["fingerprint"] != first["fingerprint"]
    row = re.search(r'<tr id="member-build">(.*?)</tr>', moved["regions"]["members"], re.S)
    assert row and "st-cancel" in row[1]

    client.force_login(staff("nobody"))
    assert client.get(url).status_code == 403


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "0", "%00", "' OR 1=1 --", "a" * 300])
def test_a_hostile_id_or_parameter_is_a_404_or_an_answer_never_a_500(client, bad_id):
    client.force_login(staff("viewer"))
    for name in ("admin:workflows_run_live", "admin:workflows_flow_live"):
        answer = client.get(reverse(name, args=[bad_id]))
        assert answer.status_code == 404, (name, bad_id, answer.status_code)
    run = checkout()
    flow = workflows.create_flow("hostile")
    for url in (
        reverse("admin:workflows_run_live", args=[run.pk]),
        reverse("admin:workflows_flow_live", args=[flow.pk]),
    ):
        answer = client.get(url, {"fingerprint": bad_id, "members_page": bad_id})
        assert answer.status_code == 200, (url, answer.status_code)
        assert "regions" in answer.json()
