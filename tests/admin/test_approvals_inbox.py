"""The approvals inbox in the admin: who sees it, what it lists, and every way a decision
made there can be refused, each shown as a message on the page and never as an error."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.support.approvals import SHIP, dispatch_gate
from tests.support.runs import waiting_step
from tests.support.users import staff
from workflows import Gate, Option, Task, Workflow
from workflows.approvals import GateCount, count_waiting_gates
from workflows.models import Event, Run, Step, WebhookEndpoint
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

INBOX = "admin:workflows_approvals"


class Dispatch(Workflow):
    name = "inbox_dispatch"
    gate = dispatch_gate(timeout=timedelta(days=2))
    ship = Task(SHIP)


class Extras(Workflow):
    name = "inbox_extras"
    gate = Gate(
        prompt="Which extras for {input[order]}?",
        options=[Option("wrap", "Gift wrap"), Option("card", "Card"), Option("bag", "Bag")],
        min_selections=1,
        max_selections=2,
        permission="demo.approve_dispatch",
    )


def waiting(workflow: type[Workflow] = Dispatch, order: str = "A-1") -> Step:
    return waiting_step(
        workflow, {"order": order, "parcels": [1, 2, 3]}, business_key=f"order-{order}", step="gate"
    )


@pytest.fixture
def approver() -> User:
    return staff("approver", "approve_dispatch")


@pytest.fixture
def outsider() -> User:
    return staff("outsider")


def signed_in(client, user: User):
    client.force_login(user)
    return client


def notes(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def decide(client, gate: Step, decision: str = "approve", **data):
    fresh = Step.objects.get(pk=gate.pk)
    payload = {"version": fresh.version, "decision": decision, "feedback": "", **data}
    return client.post(reverse("admin:workflows_approval", args=[gate.pk]), payload, follow=True)


# -- who sees the inbox ------------------------------------------------------------------


def test_the_index_links_an_approver_to_the_inbox_instead_of_saying_nothing_is_allowed(
    client, approver
):
    waiting()
    page = signed_in(client, approver).get(reverse("admin:index"))
    assert page.status_code == 200
    assert reverse(INBOX).encode() in page.content
    assert b"1 waiting for you" in page.content
    assert b"have permission to view or edit anything" not in page.content


def test_a_staff_user_who_may_decide_nothing_is_not_linked_to_the_inbox(client, outsider):
    waiting()
    page = signed_in(client, outsider).get(reverse("admin:index"))
    assert reverse(INBOX).encode() not in page.content
    inbox = client.get(reverse(INBOX))
    assert b"Dispatch order A-1?" not in inbox.content
    assert b"No gate is waiting for your decision." in inbox.content


def test_the_inbox_lists_the_users_gates_oldest_first_with_their_context(client, approver):
    first = waiting(order="A-1")
    waiting(Extras, order="B-2")
    page = signed_in(client, approver).get(reverse(INBOX))
    text = page.content.decode()
    assert text.index("Dispatch order A-1?") < text.index("Which extras for B-2?")
    assert "order-A-1" in text
    assert str(first.run_id)[:8] in text
    assert "order: A-1, parcels: [3 items]" in text
    assert "1\xa0day, 23\xa0hours" in text or "2\xa0days" in text
    assert "no timeout" in text
    assert "unclaimed" in text


def test_a_viewer_of_all_gates_sees_them_but_decides_only_their_own(client):
    gate = waiting()
    viewer = staff("vera", "view_step")
    page = signed_in(client, viewer).get(reverse(INBOX))
    assert b"Dispatch order A-1?" in page.content
    assert reverse("admin:workflows_approval", args=[gate.pk]).encode() not in page.content
    assert "may not decide" in notes(decide(client, gate, selections="express"))[0]
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_anonymous_visitors_are_sent_to_the_admin_login(client):
    gate = waiting()
    for url in (reverse(INBOX), reverse("admin:workflows_approval", args=[gate.pk])):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login") + "?next=")
    response = client.post(
        reverse("admin:workflows_approval", args=[gate.pk]),
        {"version": gate.version, "decision": "approve", "selections": "express"},
    )
    assert response.status_code == 302
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_the_inbox_costs_the_same_queries_for_many_gates(client, approver):
    signed_in(client, approver)
    waiting(order="A-1")
    client.get(reverse(INBOX))  # warm the session and content types
    with CaptureQueriesContext(connection) as few:
        client.get(reverse(INBOX))
    for number in range(2, 12):
        waiting(order=f"A-{number}")
    with CaptureQueriesContext(connection) as many:
        page = client.get(reverse(INBOX))
    assert page.content.count(b"Dispatch order A-") == 11
    assert len(many) == len(few)


def test_a_count_of_waiting_gates_stops_at_its_cap_and_says_more_than():
    for number in range(3):
        waiting(order=f"C-{number}")
    assert count_waiting_gates(None, cap=2) == GateCount(2, more=True)
    assert str(count_waiting_gates(None, cap=2)) == "more than 2"
    assert count_waiting_gates(None, cap=5) == GateCount(3, more=False)
    assert str(count_waiting_gates(None, cap=5)) == "3"
    assert bool(count_waiting_gates(None, cap=0))
    assert not GateCount(0, more=False)


def test_the_inbox_lists_the_oldest_gates_and_says_how_many_wait(client, approver, monkeypatch):
    monkeypatch.setattr("workflows.admin.approvals.INBOX_ROWS", 2)
    monkeypatch.setattr("workflows.approvals.deciders.GATE_COUNT_CAP", 3)
    signed_in(client, approver)
    for number in range(4):
        waiting(order=f"B-{number}")
    page = client.get(reverse(INBOX))
    assert page.content.count(b"Dispatch order B-") == 2
    assert b"Dispatch order B-0?" in page.content
    assert b"The oldest 2 of more than 3 waiting gates." in page.content
    assert b"more than 3 waiting for you" in page.content
    monkeypatch.setattr("workflows.approvals.deciders.GATE_COUNT_CAP", 10)
    page = client.get(reverse(INBOX))
    assert b"The oldest 2 of 4 waiting gates." in page.content
    assert b"4 waiting for you" in page.content


# -- deciding ------------------------------------------------------------------------------


def test_options_are_radio_buttons_for_one_choice_and_checkboxes_for_several(client, approver):
    one, several = waiting(), waiting(Extras, order="B-2")
    signed_in(client, approver)
    page = client.get(reverse("admin:workflows_approval", args=[one.pk])).content.decode()
    assert page.count('type="radio"') == 2
    assert "Choose exactly 1" in page
    page = client.get(reverse("admin:workflows_approval", args=[several.pk])).content.decode()
    assert page.count('type="checkbox"') == 3
    assert "Choose 1 to 2" in page
    assert '<label for="id_feedback">Feedback</label>' in page


def test_approving_records_who_when_and_where_and_the_run_advances(client, approver):
    gate = waiting()
    response = decide(signed_in(client, approver), gate, selections="express", feedback="rush")
    assert response.redirect_chain[-1][0] == reverse(INBOX)
    [note] = notes(response)
    assert "Approved gate “gate” of run order-A-1" in note
    assert "the run is now running" in note
    gate.refresh_from_db()
    assert (gate.status, gate.decision, gate.selections) == ("completed", "approved", ["express"])
    assert (gate.decided_by, gate.decided_from, gate.feedback) == (approver, "127.0.0.1", "rush")
    assert gate.run.steps.get(name="ship").status == "ready"
    run_pending()
    assert Run.objects.get(pk=gate.run_id).status == "completed"


def test_several_selections_are_approved_together(client, approver):
    gate = waiting(Extras)
    decide(signed_in(client, approver), gate, selections=["wrap", "card"])
    assert Step.objects.get(pk=gate.pk).selections == ["wrap", "card"]


def test_rejecting_fails_the_run_with_the_feedback(client, approver):
    gate = waiting()
    response = decide(signed_in(client, approver), gate, "reject", feedback="address unknown")
    assert "Rejected gate" in notes(response)[0]
    gate.refresh_from_db()
    assert (gate.decision, gate.feedback) == ("rejected", "address unknown")
    assert Run.objects.get(pk=gate.run_id).status == "failed"


@pytest.mark.parametrize(
    "selections", [[], ["standard", "express"], ["overnight"]], ids=["none", "two", "unknown"]
)
def test_bad_selections_are_a_message_and_nothing_is_written(client, approver, selections):
    gate = waiting()
    response = decide(signed_in(client, approver), gate, selections=selections)
    assert response.status_code == 200
    [note] = notes(response)
    assert "Nothing was recorded" in note
    assert response.redirect_chain[-1][0] == reverse("admin:workflows_approval", args=[gate.pk])
    assert Step.objects.get(pk=gate.pk).version == gate.version


def test_a_decision_that_lost_the_race_is_a_message(client, approver):
    gate = waiting()
    form_version = gate.version
    workflows.approve_gate(
        gate, user=staff("colleague", "approve_dispatch"), selections=["standard"]
    )
    response = signed_in(client, approver).post(
        reverse("admin:workflows_approval", args=[gate.pk]),
        {"version": form_version, "decision": "approve", "selections": "express"},
        follow=True,
    )
    assert response.status_code == 200
    assert notes(response) == ["This gate was already approved by colleague; nothing was recorded."]
    gate.refresh_from_db()
    assert (gate.selections, gate.decided_by.username) == (["standard"], "colleague")


def test_a_race_lost_inside_the_service_is_a_message_too(client, approver, monkeypatch):
    gate = waiting()
    real = workflows.services.approve_gate

    def beaten(step, **kwargs):
        # Another approver's decision commits between the page's check and this one.
        real(step.pk, user=staff("colleague", "approve_dispatch"), selections=["standard"])
        return real(step, **kwargs)

    monkeypatch.setattr("workflows.admin.approvals.services.approve_gate", beaten)
    response = decide(signed_in(client, approver), gate, selections="express")
    assert response.status_code == 200
    assert "already approved" in notes(response)[0]
    assert Step.objects.get(pk=gate.pk).decided_by.username == "colleague"


def test_a_gate_changed_since_the_form_was_opened_is_a_message(client, approver):
    gate = waiting()
    other = staff("colleague", "approve_dispatch")
    workflows.claim_gate(gate, other)
    workflows.unclaim_gate(gate, other)
    response = signed_in(client, approver).post(
        reverse("admin:workflows_approval", args=[gate.pk]),
        {"version": gate.version, "decision": "approve", "selections": "express"},
        follow=True,
    )
    assert "changed since you opened it" in notes(response)[0]
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_a_gate_claimed_by_someone_else_is_a_message(client, approver):
    gate = waiting()
    workflows.claim_gate(gate, staff("colleague", "approve_dispatch"))
    response = decide(signed_in(client, approver), gate, selections="express")
    assert response.status_code == 200
    [note] = notes(response)
    assert "colleague" in note and "Nothing was recorded" in note
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_a_timed_out_gate_is_a_message(client, approver):
    gate = waiting()
    version = gate.version
    run_pending(until=timezone.now() + timedelta(days=3))
    assert Step.objects.get(pk=gate.pk).decision == "rejected"  # on_timeout="reject"
    response = signed_in(client, approver).post(
        reverse("admin:workflows_approval", args=[gate.pk]),
        {"version": version, "decision": "approve", "selections": "express"},
        follow=True,
    )
    assert response.status_code == 200
    assert "timed out before your decision and was rejected automatically" in notes(response)[0]


def test_posting_without_permission_is_a_message_and_writes_nothing(client, outsider):
    gate = waiting()
    events = Event.objects.count()
    response = signed_in(client, outsider).post(
        reverse("admin:workflows_approval", args=[gate.pk]),
        {"version": gate.version, "decision": "approve", "selections": "express"},
        follow=True,
    )
    assert response.status_code == 200
    assert notes(response) == ["No gate waiting for your decision has this id."]
    assert b"Dispatch order A-1?" not in response.content
    assert Step.objects.get(pk=gate.pk).version == gate.version
    assert Event.objects.count() == events


# -- claims ---------------------------------------------------------------------------------


def test_claim_and_release_from_the_inbox(client, approver):
    gate = waiting()
    signed_in(client, approver)
    response = client.post(reverse("admin:workflows_approval_claim", args=[gate.pk]), follow=True)
    assert "You claimed gate" in notes(response)[0]
    assert b"claimed by you" in response.content
    assert Step.objects.get(pk=gate.pk).claimed_by == approver
    response = client.post(reverse("admin:workflows_approval_release", args=[gate.pk]), follow=True)
    assert "You released gate" in notes(response)[0]
    assert Step.objects.get(pk=gate.pk).claimed_by is None


def test_a_claim_held_by_someone_else_is_shown_and_cannot_be_taken(client, approver):
    gate = waiting()
    workflows.claim_gate(gate, staff("colleague", "approve_dispatch"))
    signed_in(client, approver)
    page = client.get(reverse(INBOX))
    assert b"claimed by <strong>colleague</strong>" in page.content
    assert reverse("admin:workflows_approval_claim", args=[gate.pk]).encode() not in page.content
    response = client.post(reverse("admin:workflows_approval_claim", args=[gate.pk]), follow=True)
    assert "colleague" in notes(response)[0]
    assert client.get(reverse("admin:workflows_approval_claim", args=[gate.pk])).status_code == 405
    assert Step.objects.get(pk=gate.pk).claimed_by.username == "colleague"


# -- engine rows stay read-only --------------------------------------------------------------


def test_no_engine_row_can_be_added_changed_or_deleted_in_the_generic_admin(rf):
    request = rf.get("/")
    request.user = User.objects.create_superuser("root")
    # Webhook endpoints are configuration: their form saves through a service.
    engine_admins = [
        model_admin
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label == "workflows" and model is not WebhookEndpoint
    ]
    assert {type(model_admin).__name__ for model_admin in engine_admins} >= {
        "RunAdmin",
        "StepAdmin",
        "TimerAdmin",
        "FanOutItemAdmin",
        "CompensationRecordAdmin",
        "SignalAdmin",
        "WebhookDeliveryAdmin",
    }
    for model_admin in engine_admins:
        assert not model_admin.has_add_permission(request)
        assert not model_admin.has_change_permission(request)
        assert not model_admin.has_delete_permission(request)
        for inline in model_admin.get_inline_instances(request):
            assert not inline.has_add_permission(request, None)
            assert not inline.has_change_permission(request)
            assert not inline.has_delete_permission(request)
