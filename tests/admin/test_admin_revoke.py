"""The console's "Revoke lease": a button on a running step of the run page for those who
may operate runs, a confirmation page naming the attempt and its worker, a POST that
revokes as the signed-in user, and a second cancel that says it changed nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

import workflows
from tests.admin.admin_console import noted, notes, staff
from tests.support import revoke
from tests.support.revoke import Wedged
from workflows.engine import claim_step
from workflows.models import CompensationRecord, Event, FanOutItem, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def page(run: Run) -> str:
    return reverse("admin:workflows_run_change", args=[run.pk])


def act(run: Run, verb: str = "revoke") -> str:
    return reverse("admin:workflows_run_act", args=[run.pk, verb])


def running_load() -> tuple[Run, Step]:
    return revoke.running_load("host-1:4242:77")


@pytest.fixture
def operator(client):
    client.force_login(staff("operator"))
    return client


def test_the_button_is_on_a_running_step_for_operators_only(client):
    run, step = running_load()
    button = f'{act(run)}?step={step.pk}"'.encode()
    client.force_login(staff("operator"))
    shown = client.get(page(run))
    assert button in shown.content and "Revoke lease “load”".encode() in shown.content
    client.force_login(staff("viewer"))
    assert button not in client.get(page(run)).content
    assert client.get(act(run) + f"?step={step.pk}").status_code == 403
    posted = {"unit": f"step:{step.pk}", "attempts": f"step:{step.pk}=1"}
    assert client.post(act(run), posted).status_code == 403
    assert Step.objects.get(pk=step.pk).status == "running"


def test_no_button_on_a_step_that_is_not_running(operator):
    run = workflows.start_run(Wedged)
    assert b"Revoke lease" not in operator.get(page(run)).content
    run_pending()
    assert b"Revoke lease" not in operator.get(page(run)).content


def test_the_confirmation_page_names_the_attempt_and_changes_nothing(operator):
    run, step = running_load()
    confirm = operator.get(act(run) + f"?step={step.pk}")
    assert confirm.status_code == 200
    text = confirm.content.decode()
    assert "Revoke lease" in text
    assert "take the lease from the running attempt now" in text
    assert "step “load”: attempt 1 of 1, held by worker host-1:4242:77, lease until" in text
    assert f'value="step:{step.pk}" required id="id_unit_0" checked>' in text  # preselected
    assert 'name="reason"' in text
    # The attempt shown (with a step's round) travels with the form: the revoke takes
    # that attempt or nothing.
    assert f'<input type="hidden" name="attempts" value="step:{step.pk}=1@1"' in text
    assert Step.objects.get(pk=step.pk).status == "running"  # a GET changes nothing


def test_posting_revokes_as_the_user_and_says_what_happened(operator):
    run, step = running_load()
    response = operator.post(
        act(run),
        {"unit": f"step:{step.pk}", "attempts": f"step:{step.pk}=1", "reason": "worker hung"},
        follow=True,
    )
    assert response.status_code == 200
    assert noted(
        response,
        "revoked attempt 1 of step “load”, held by worker host-1:4242:77; "
        "it is ready and runs again",
    ), notes(response)
    revoked = Event.objects.get(run=run, type="lease.revoked").payload
    assert (revoked["by"], revoked["reason"]) == ("operator", "worker hung")
    assert Step.objects.get(pk=step.pk).status == "ready"


def test_a_unit_that_stopped_running_meanwhile_is_refused_as_a_message(operator):
    run, step = running_load()
    workflows.revoke_lease(step, expected_attempt=1)  # someone else was quicker
    shown = {"unit": f"step:{step.pk}", "attempts": f"step:{step.pk}=1", "reason": ""}
    response = operator.post(act(run), shown, follow=True)
    assert noted(
        response,
        "Revoke lease refused: attempt 1 of step “load” was revoked already (a repeated "
        "request); it is ready in attempt 1. Nothing changed.",
    ), notes(response)
    assert Event.objects.filter(run=run, type="lease.revoked").count() == 1


def test_a_double_click_after_a_new_attempt_started_leaves_it_alone(operator):
    """The page showed attempt 1; by the second click attempt 2 runs on a healthy worker."""
    run, step = running_load()
    shown = {"unit": f"step:{step.pk}", "attempts": f"step:{step.pk}=1", "reason": ""}
    operator.post(act(run), shown)
    claim_step(step.pk, "host-2:1:1")
    response = operator.post(act(run), shown, follow=True)
    assert noted(
        response,
        "attempt 1 of step “load” was replaced by a newer attempt, which was left alone; it "
        "is running in attempt 2",
    ), notes(response)
    fresh = Step.objects.get(pk=step.pk)
    assert (fresh.status, fresh.attempt, fresh.lease_owner) == ("running", 2, "host-2:1:1")
    assert Event.objects.filter(run=run, type="lease.revoked").count() == 1


def test_a_post_without_the_attempt_shown_revokes_nothing(operator):
    run, step = running_load()
    response = operator.post(act(run), {"unit": f"step:{step.pk}", "reason": ""})
    assert response.status_code == 200  # the form again, with its error
    assert "did not say which attempt it showed" in response.content.decode()
    assert Step.objects.get(pk=step.pk).status == "running"


def test_a_unit_of_another_run_is_not_accepted(operator):
    run, _ = running_load()
    _, other = running_load()
    response = operator.post(
        act(run), {"unit": f"step:{other.pk}", "attempts": f"step:{other.pk}=1", "reason": ""}
    )
    assert response.status_code == 200  # the form again, with its error
    assert Step.objects.get(pk=other.pk).status == "running"


def test_a_fan_out_steps_button_offers_its_running_items(operator):
    run, item = revoke.running_item("p2", "host-2:1:1")
    ship = Step.objects.get(run=run, name="ship")
    assert f"{act(run)}?step={ship.pk}".encode() in operator.get(page(run)).content
    confirm = operator.get(act(run) + f"?step={ship.pk}").content.decode()
    assert "item “p2” of step “ship”: attempt 1 of 3, held by worker host-2:1:1" in confirm
    operator.post(act(run), {"unit": f"item:{item.pk}", "attempts": f"item:{item.pk}=1"})
    assert FanOutItem.objects.get(pk=item.pk).status == "ready"


def test_a_running_compensation_has_its_link_and_is_revoked(operator):
    run, record = revoke.running_compensation("host-3:1:1")
    shown = operator.get(page(run)).content.decode()
    assert f"{act(run)}?step={record.step_id}" in shown
    unit = f"compensation:{record.pk}"
    operator.post(act(run), {"unit": unit, "attempts": f"{unit}=1", "reason": ""})
    assert CompensationRecord.objects.get(pk=record.pk).status == "ready"


def test_cancelling_a_cancelled_run_says_nothing_changed(operator):
    run = workflows.start_run(Wedged)
    workflows.cancel_run(run)
    before = Run.objects.get(pk=run.pk).version
    response = operator.post(act(run, "cancel"), {"reason": "", "compensate": "on"}, follow=True)
    assert noted(response, "was cancelled already; nothing changed"), notes(response)
    assert Run.objects.get(pk=run.pk).version == before
