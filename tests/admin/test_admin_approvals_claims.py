"""The approvals pages as an approver meets them: a gate someone else has claimed shows
who holds it with its decision buttons disabled (or a take-over for those who may
override claims), and the sidebar leads to the inbox instead of "nothing allowed"."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

import workflows
from tests.admin.test_approvals_inbox import notes, waiting
from tests.support.users import staff
from workflows import Gate, Workflow
from workflows.models import Step

pytestmark = pytest.mark.django_db

NOTHING_ALLOWED = "have permission to view or edit anything"


def decision_page(client, gate: Step) -> str:
    return client.get(reverse("admin:workflows_approval", args=[gate.pk])).content.decode()


def buttons(html: str) -> dict[str, bool]:
    """Each decision button's value and whether it is disabled."""
    found = re.findall(r'<button type="submit" name="decision" value="(\w+)"([^>]*)>', html)
    return {value: " disabled" in attributes for value, attributes in found}


def test_a_gate_claimed_by_someone_else_shows_the_holder_and_disabled_buttons(client):
    gate = waiting()
    holder = staff("holder", "approve_dispatch")
    workflows.claim_gate(gate, holder)
    client.force_login(staff("second", "approve_dispatch"))
    html = decision_page(client, gate)
    assert buttons(html) == {"approve": True, "reject": True}
    assert '<fieldset class="decision-fields" disabled' in html  # options and feedback too
    assert "<strong>holder</strong> has claimed this gate and is deciding it" in html
    assert 'id="take-over"' not in html


def test_ones_own_claim_and_an_unclaimed_gate_keep_the_buttons(client):
    gate = waiting()
    approver = staff("approver", "approve_dispatch")
    client.force_login(approver)
    assert buttons(decision_page(client, gate)) == {"approve": False, "reject": False}
    workflows.claim_gate(gate, approver)
    html = decision_page(client, gate)
    assert buttons(html) == {"approve": False, "reject": False}
    assert 'id="claim-notice"' not in html
    assert '<fieldset class="decision-fields">' in html


def test_those_who_may_override_claims_may_decide_or_take_over(client):
    gate = waiting()
    workflows.claim_gate(gate, staff("holder", "approve_dispatch"))
    client.force_login(staff("lead", "approve_dispatch", "override_gate_claim"))
    html = decision_page(client, gate)
    assert buttons(html) == {"approve": False, "reject": False}
    assert "You may override their claim" in html
    assert 'id="take-over"' in html
    response = client.post(
        reverse("admin:workflows_approval_take_over", args=[gate.pk]), {"next": "gate"}
    )
    assert response["Location"] == reverse("admin:workflows_approval", args=[gate.pk])
    assert notes(response)[-1].startswith("You took over gate “gate” of run ")
    assert notes(response)[-1].endswith(" from holder.")
    assert Step.objects.get(pk=gate.pk).claimed_by.username == "lead"


def test_taking_over_without_the_override_permission_is_a_message(client):
    gate = waiting()
    workflows.claim_gate(gate, staff("holder", "approve_dispatch"))
    client.force_login(staff("second", "approve_dispatch"))
    response = client.post(reverse("admin:workflows_approval_take_over", args=[gate.pk]))
    assert response.status_code == 302
    assert "Nothing was recorded" in notes(response)[-1]
    assert Step.objects.get(pk=gate.pk).claimed_by.username == "holder"


@pytest.mark.parametrize("gates_waiting", [True, False])
def test_the_approvals_sidebar_leads_to_the_inbox_not_to_nothing_allowed(client, gates_waiting):
    gate = waiting() if gates_waiting else None
    client.force_login(staff("approver", "approve_dispatch"))
    pages = [reverse("admin:workflows_approvals")]
    if gate is not None:
        pages.append(reverse("admin:workflows_approval", args=[gate.pk]))
    for url in pages:
        html = client.get(url).content.decode()
        sidebar = html[html.index('<nav class="sticky" id="nav-sidebar"') :]
        sidebar = sidebar[: sidebar.index("</nav>")]
        assert reverse("admin:workflows_approvals") in sidebar
        assert ("1 waiting for you" in sidebar) is gates_waiting
        assert NOTHING_ALLOWED not in html


def test_the_sidebar_still_lists_the_apps_of_those_who_may_use_them(client):
    client.force_login(staff("viewer", "view_run", "approve_dispatch"))
    html = client.get(reverse("admin:workflows_approvals")).content.decode()
    sidebar = html[html.index('id="nav-sidebar"') :]
    assert reverse("admin:workflows_run_changelist") in sidebar
    assert reverse("admin:workflows_dashboard") in sidebar


class ByGroup(Workflow):
    """A gate for a group of approvers, so the index can find them before any run."""

    name = "admin_index_by_group"
    gate = Gate(prompt="Ship?", assignees=["group:night-shift"])


def test_an_approver_with_an_empty_inbox_still_finds_it_on_the_index(client):
    client.force_login(staff("approver", "approve_dispatch"))
    html = client.get(reverse("admin:index")).content.decode()
    assert f'<a href="{reverse("admin:workflows_approvals")}">Approvals inbox</a>' in html
    assert "nothing waiting for you" in html
    assert NOTHING_ALLOWED not in html


def test_a_gates_group_finds_the_inbox_and_others_do_not(client):
    member = staff("member")
    member.groups.add(Group.objects.create(name="night-shift"))
    client.force_login(member)
    assert "Approvals inbox" in client.get(reverse("admin:index")).content.decode()
    client.force_login(staff("outsider"))
    html = client.get(reverse("admin:index")).content.decode()
    assert "Approvals inbox" not in html
