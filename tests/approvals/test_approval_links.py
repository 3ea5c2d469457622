"""Signed approval links: GET confirms and writes nothing, POST decides once, and every
link that cannot be used says why on a readable page with its own status."""

from __future__ import annotations

import time
from datetime import timedelta
from urllib.parse import parse_qs

import pytest
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from django.urls import reverse

import workflows
from tests.support.approvals import SHIP, dispatch_gate
from tests.support.users import staff
from workflows import GateAlreadyDecided, InvalidTransition, Task, Workflow
from workflows.approvals.links import read_token
from workflows.conf import workflow_settings
from workflows.models import Event, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

OLD_KEY = "flowsite-test-old-key-" + "x" * 40
NEW_KEY = "flowsite-test-new-key-" + "y" * 40


class Mailed(Workflow):
    name = "links_mailed"
    gate = dispatch_gate()
    ship = Task(SHIP)


def waiting(order: str = "M-1") -> Step:
    run = workflows.start_run(Mailed, {"order": order}, business_key=order)
    run_pending()
    return run.steps.get(name="gate")


@pytest.fixture
def approver() -> User:
    return staff("approver", "approve_dispatch")


@pytest.fixture
def gate() -> Step:
    return waiting()


@pytest.fixture
def link(gate, approver) -> str:
    return workflows.approval_link(gate, approver)


def snapshot(gate: Step) -> tuple[int, str, int]:
    """What must not move when a link is only looked at."""
    fresh = Step.objects.get(pk=gate.pk)
    return fresh.version, fresh.status, Event.objects.filter(run_id=gate.run_id).count()


def refused(client: Client, link: str, gate: Step, status: int, text: bytes) -> None:
    """The link's GET and its POST both answer ``status`` with a page saying ``text``, and
    the gate is as it was."""
    before = snapshot(gate)
    for response in (client.get(link), approve(client, link, version=gate.version)):
        assert response.status_code == status
        assert text in response.content
    assert snapshot(gate) == before


def approve(client: Client, link: str, **data):
    return client.post(link, {"version": 0, "decision": "approve", "selections": "express", **data})


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


# -- making links ----------------------------------------------------------------------------


def test_a_link_is_site_relative_or_absolute(rf, gate, approver):
    relative = workflows.approval_link(gate, approver)
    assert relative.startswith("/admin/workflows/step/approvals/link/")
    absolute = workflows.approval_link(gate.pk, approver, request=rf.get("/", secure=True))
    assert absolute.startswith("https://testserver/admin/workflows/step/approvals/link/")
    mailed = workflows.approval_link(gate, approver, base_url="https://ops.example.com/")
    assert mailed.startswith("https://ops.example.com/admin/workflows/step/approvals/link/")
    target = read_token(mailed.rstrip("/").rsplit("/", 1)[1])
    assert (target.step, target.version, target.user) == (gate.pk, gate.version, str(approver.pk))


def test_no_link_is_made_for_a_gate_no_longer_waiting_or_a_step_that_is_no_gate(gate, approver):
    workflows.approve_gate(gate, user=approver, selections=["express"])
    with pytest.raises(GateAlreadyDecided):
        workflows.approval_link(gate.pk, approver)
    with pytest.raises(InvalidTransition):
        workflows.approval_link(gate.run.steps.get(name="ship"), approver)


@pytest.mark.parametrize("age", [timedelta(0), 3600, None])
def test_the_link_age_must_be_a_positive_timedelta(age):
    with (
        override_settings(WORKFLOWS={"APPROVAL_LINK_MAX_AGE": age}),
        pytest.raises(ImproperlyConfigured, match="APPROVAL_LINK_MAX_AGE"),
    ):
        workflow_settings.APPROVAL_LINK_MAX_AGE  # noqa: B018


# -- GET confirms, POST decides once -----------------------------------------------------------


def test_get_shows_the_confirmation_page_and_changes_nothing(gate, approver, link):
    before = snapshot(gate)
    page = signed_in(approver).get(link)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Dispatch order M-1?" in text
    assert text.count('type="radio"') == 2
    assert 'value="approve"' in text and 'value="reject"' in text
    assert "csrfmiddlewaretoken" in text
    assert snapshot(gate) == before


def test_post_decides_once_and_a_second_post_finds_the_link_used(gate, approver, link):
    client = signed_in(approver)
    response = approve(client, link, version=gate.version, feedback="by mail")
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:workflows_approvals")
    decided = Step.objects.get(pk=gate.pk)
    assert (decided.decision, decided.selections, decided.feedback) == (
        "approved",
        ["express"],
        "by mail",
    )
    assert (decided.decided_by, decided.decided_from) == (approver, "127.0.0.1")
    after = snapshot(gate)
    again = approve(client, link, version=gate.version)
    assert again.status_code == 409
    assert b"This approval link has been used" in again.content
    assert b"approved by approver" in again.content
    assert snapshot(gate) == after
    assert client.get(link).status_code == 409


def test_a_rejection_by_link_fails_the_run(gate, approver, link):
    response = signed_in(approver).post(
        link, {"version": gate.version, "decision": "reject", "feedback": "no stock"}
    )
    assert response.status_code == 302
    assert Run.objects.get(pk=gate.run_id).status == "failed"


def test_the_post_needs_the_csrf_token(gate, approver, link):
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    before = snapshot(gate)
    assert approve(client, link, version=gate.version).status_code == 403
    assert snapshot(gate) == before


def test_bad_selections_by_link_are_a_message_on_the_same_page(gate, approver, link):
    before = snapshot(gate)
    response = approve(signed_in(approver), link, version=gate.version, selections="overnight")
    assert response.status_code == 400
    assert b"has no option" in response.content
    assert b"Dispatch order M-1?" in response.content
    assert snapshot(gate) == before


# -- links that cannot be used -------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_the_admin_login_and_nothing_changes(gate, link):
    before = snapshot(gate)
    for response in (Client().get(link), approve(Client(), link, version=gate.version)):
        assert response.status_code == 302
        login, query = response["Location"].split("?")
        assert (login, parse_qs(query)) == (reverse("admin:login"), {"next": [link]})
    assert snapshot(gate) == before


@pytest.mark.parametrize("where", ["signature", "payload", "truncated"])
def test_a_tampered_link_is_refused_with_403(gate, approver, link, where):
    token = link.rstrip("/").rsplit("/", 1)[1]
    payload, stamp, signature = token.rsplit(":", 2)
    forged = {
        "signature": f"{payload}:{stamp}:{signature[:-2]}xx",
        "payload": f"{payload[:-2]}xx:{stamp}:{signature}",
        "truncated": f"{payload}:{stamp}",
    }[where]
    client = signed_in(approver)
    url = reverse("admin:workflows_approval_link", args=[forged])
    refused(client, url, gate, 403, b"This approval link is not valid")


def test_a_value_signed_for_another_purpose_is_no_link(gate, approver):
    token = signing.dumps({"s": gate.pk, "v": gate.version, "u": str(approver.pk)})
    url = reverse("admin:workflows_approval_link", args=[token])
    assert signed_in(approver).get(url).status_code == 403


def test_an_expired_link_is_refused_with_410(gate, approver, monkeypatch):
    four_days_ago = int(time.time()) - 4 * 24 * 3600
    with monkeypatch.context() as patched:
        patched.setattr(
            signing.TimestampSigner, "timestamp", lambda self: signing.b62_encode(four_days_ago)
        )
        link = workflows.approval_link(gate, approver)
    client = signed_in(approver)
    refused(client, link, gate, 410, b"This approval link has expired")
    with override_settings(WORKFLOWS={"APPROVAL_LINK_MAX_AGE": timedelta(days=5)}):
        assert client.get(link).status_code == 200


def test_a_link_whose_gate_moved_on_is_used(gate, approver, link):
    other = staff("colleague", "approve_dispatch")
    workflows.claim_gate(gate, other)
    workflows.unclaim_gate(gate, other)
    client = signed_in(approver)
    refused(client, link, gate, 409, b"This approval link has been used")


def test_a_decision_by_someone_else_between_get_and_post_makes_the_link_used(gate, approver, link):
    client = signed_in(approver)
    assert client.get(link).status_code == 200
    workflows.approve_gate(
        gate, user=staff("colleague", "approve_dispatch"), selections=["standard"]
    )
    response = approve(client, link, version=gate.version)
    assert response.status_code == 409
    assert b"approved by colleague" in response.content
    assert Step.objects.get(pk=gate.pk).selections == ["standard"]


def test_a_race_lost_inside_the_service_shows_the_used_page(gate, approver, link, monkeypatch):
    real = workflows.services.approve_gate

    def beaten(step, **kwargs):
        # Another decision commits between the link's checks and the service's read.
        real(step.pk, user=staff("colleague", "approve_dispatch"), selections=["standard"])
        return real(step, **kwargs)

    monkeypatch.setattr("workflows.admin.approvals.services.approve_gate", beaten)
    response = approve(signed_in(approver), link, version=gate.version)
    assert response.status_code == 409
    assert Step.objects.get(pk=gate.pk).decided_by.username == "colleague"


def test_a_gate_claimed_by_someone_else_in_a_race_is_refused(gate, approver, link, monkeypatch):
    real = workflows.services.approve_gate

    def overtaken(step, **kwargs):
        workflows.claim_gate(step.pk, staff("colleague", "approve_dispatch"))
        return real(step, **kwargs)

    monkeypatch.setattr("workflows.admin.approvals.services.approve_gate", overtaken)
    response = approve(signed_in(approver), link, version=gate.version)
    assert response.status_code == 409
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_a_link_for_someone_else_is_refused_with_403(gate, link):
    colleague = signed_in(staff("colleague", "approve_dispatch"))
    refused(colleague, link, gate, 403, b"This approval link is for someone else")


def test_a_link_for_someone_who_may_not_decide_is_refused_with_403(gate):
    outsider = staff("outsider")
    link = workflows.approval_link(gate, outsider)
    client = signed_in(outsider)
    refused(client, link, gate, 403, b"You may not decide this gate")


def test_a_link_survives_key_rotation_until_the_old_key_is_dropped(gate, approver):
    with override_settings(SECRET_KEY=OLD_KEY, SECRET_KEY_FALLBACKS=[]):
        link = workflows.approval_link(gate, approver)
    with override_settings(SECRET_KEY=NEW_KEY, SECRET_KEY_FALLBACKS=[]):
        client = signed_in(approver)
        refused = client.get(link)
        assert refused.status_code == 403
        assert b"This approval link is not valid" in refused.content
    with override_settings(SECRET_KEY=NEW_KEY, SECRET_KEY_FALLBACKS=[OLD_KEY]):
        client = signed_in(approver)
        assert client.get(link).status_code == 200
        assert approve(client, link, version=gate.version).status_code == 302
    assert Step.objects.get(pk=gate.pk).decision == "approved"
