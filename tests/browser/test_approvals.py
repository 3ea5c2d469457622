"""Approvers in a real browser: the inbox from the admin index, a decision, a signed link."""

from __future__ import annotations

import pytest

import workflows
from tests.support.approvals import SHIP, dispatch_gate
from tests.support.browser import person, sign_in
from workflows import Task, Workflow
from workflows.models import Event, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)


class Dispatch(Workflow):
    name = "browser_dispatch"
    gate = dispatch_gate("Dispatch order {input[order]} to {input[city]}?")
    ship = Task(SHIP)


def waiting(order: str = "B-1") -> Step:
    run = workflows.start_run(Dispatch, {"order": order, "city": "Lyon"}, business_key=order)
    run_pending()
    return run.steps.get(name="gate")


def state(gate: Step) -> tuple[int, str, int]:
    fresh = Step.objects.get(pk=gate.pk)
    return fresh.version, fresh.status, Event.objects.filter(run_id=gate.run_id).count()


def test_an_approver_decides_from_the_inbox_and_sees_the_run_advance(new_page):
    gate = waiting()
    person("approver", "approve_dispatch", "view_run")
    page = new_page()
    sign_in(page, "approver")

    page.get_by_role("link", name="Approvals inbox").click()
    row = page.locator(f"#gate-{gate.pk}")
    assert "Dispatch order B-1 to Lyon?" in row.inner_text()
    assert "unclaimed" in row.inner_text()
    row.get_by_role("link", name=f"Decide gate {gate.pk}").click()

    page.get_by_label("Express").check()
    page.get_by_label("Feedback").fill("customer pays for express")
    page.get_by_role("button", name="Approve").click()
    note = page.locator(".messagelist .success").inner_text()
    assert "Approved gate “gate” of run B-1" in note
    assert "the run is now running" in note
    assert page.locator(f"#gate-{gate.pk}").count() == 0

    run_pending()
    page.goto(f"/admin/workflows/run/{gate.run_id}/change/")
    assert "completed" in page.locator("#content").inner_text().lower()
    decided = Step.objects.get(pk=gate.pk)
    assert (decided.decision, decided.selections, decided.decided_by.username) == (
        "approved",
        ["express"],
        "approver",
    )
    assert Run.objects.get(pk=gate.run_id).status == "completed"


def test_a_user_without_the_permission_neither_sees_nor_decides_the_gate(new_page):
    gate = waiting()
    person("outsider")
    page = new_page()
    sign_in(page, "outsider")
    assert page.get_by_role("link", name="Approvals inbox").count() == 0

    page.goto("/admin/workflows/step/approvals/")
    assert "No gate is waiting for your decision." in page.content()
    assert "Dispatch order B-1" not in page.content()

    before = state(gate)
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"/admin/workflows/step/approvals/{gate.pk}/",
        form={
            "csrfmiddlewaretoken": csrf,
            "version": str(gate.version),
            "decision": "approve",
            "selections": "express",
        },
    )
    assert response.ok  # the refusal is a message on the page, not an error page
    assert "No gate waiting for your decision has this id." in response.text()
    assert state(gate) == before


def test_a_signed_link_get_changes_nothing_and_its_post_decides_once(new_page):
    gate = waiting()
    approver_user = person("approver", "approve_dispatch")
    link = workflows.approval_link(gate, approver_user)
    before = state(gate)

    scanner = new_page()  # a mail scanner follows the link without signing in
    scanner.goto(link)
    assert "/admin/login/" in scanner.url
    assert state(gate) == before

    first = new_page()
    sign_in(first, "approver", next_path=link)
    assert "Dispatch order B-1 to Lyon?" in first.content()
    second = first.context.new_page()  # the same mail opened twice
    second.goto(link)
    assert state(gate) == before

    first.get_by_label("Express").check()
    first.get_by_role("button", name="Approve").click()
    assert "Approved gate" in first.locator(".messagelist .success").inner_text()
    after = state(gate)
    assert after[1] == "completed"

    second.get_by_label("Standard").check()
    with second.expect_navigation() as navigation:
        second.get_by_role("button", name="Approve").click()
    assert navigation.value.status == 409
    assert "This approval link has been used" in second.content()
    assert state(gate) == after
    assert Step.objects.get(pk=gate.pk).selections == ["express"]


def test_a_gate_claimed_by_someone_else_cannot_be_submitted_until_taken_over(new_page):
    gate = waiting("B-7")
    workflows.claim_gate(gate, person("packer", "approve_dispatch"))
    person("second", "approve_dispatch")
    person("lead", "approve_dispatch", "override_gate_claim")
    before = state(gate)

    page = new_page()
    sign_in(page, "second", f"/admin/workflows/step/approvals/{gate.pk}/")
    assert "packer has claimed this gate" in page.locator("#claim-notice").inner_text()
    approve = page.get_by_role("button", name="Approve")
    assert approve.is_disabled()
    assert page.get_by_role("button", name="Reject").is_disabled()
    assert page.get_by_role("button", name="Take over").count() == 0
    assert page.get_by_label("Express").is_disabled()  # the whole form is read-only
    assert page.get_by_label("Feedback").is_disabled()
    approve.click(force=True)  # a disabled button submits nothing
    assert state(gate) == before

    lead = new_page()
    sign_in(lead, "lead", f"/admin/workflows/step/approvals/{gate.pk}/")
    lead.get_by_role("button", name="Take over").click()
    assert "You took over gate" in lead.locator(".messagelist .success").inner_text()
    assert lead.get_by_role("button", name="Approve").is_enabled()
    assert Step.objects.get(pk=gate.pk).claimed_by.username == "lead"
