"""Operator actions in the console: confirmation pages, the service calls they make with
the signed-in user, refusals as messages, bulk dry runs, starting runs, permissions."""

from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.urls import reverse

import workflows
from tests.admin.admin_console import checkout, failed_checkout, fragile, noted, notes, staff
from workflows.models import Event, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

RUNS = "admin:workflows_run_changelist"


def act(run: Run, verb: str) -> str:
    return reverse("admin:workflows_run_act", args=[run.pk, verb])


def signed_in(client, role: str):
    client.force_login(staff(role))
    return client


@pytest.fixture
def operator(client):
    return signed_in(client, "operator")


def test_cancel_confirms_first_then_cancels_with_compensation_as_the_user(operator):
    run = checkout()
    confirm = operator.get(act(run, "cancel"))
    assert confirm.status_code == 200
    assert b"stop the run and compensate what it completed" in confirm.content
    assert b"The run's state allows this now" in confirm.content
    assert Run.objects.get(pk=run.pk).status == "waiting"  # GET changes nothing
    done = operator.post(act(run, "cancel"), {"reason": "customer asked", "compensate": "on"})
    assert done.status_code == 302
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    request = Event.objects.get(run=run, type="run.cancel_requested")
    assert request.payload["by"] == "operator"
    assert request.payload["compensate"] is True
    assert Event.objects.filter(run=run, type="compensation.completed").exists()


@pytest.mark.parametrize("verb", ["cancel", "terminate", "pause", "retry", "priority"])
def test_a_confirmation_page_names_the_run_once(operator, verb):
    run = checkout()
    html = operator.get(act(run, verb)).content.decode()
    what = html[html.index('<p class="what">') :]
    what = what[: what.index("</p>")]
    assert "</strong> — run <span" in what
    assert "run of run" not in html.replace("</strong>", "")


def test_cancel_without_compensation(operator):
    run = checkout()
    operator.post(act(run, "cancel"), {"reason": ""})
    assert Event.objects.get(run=run, type="run.cancel_requested").payload["compensate"] is False


def test_a_refused_verb_is_a_message_not_an_error_page(operator):
    run = checkout()
    confirm = operator.get(act(run, "resume"))
    assert b"Not possible now: run is waiting; resume needs paused" in confirm.content
    response = operator.post(act(run, "resume"), follow=True)
    assert response.status_code == 200
    assert any(
        "Resume run refused" in note and "Nothing changed" in note for note in notes(response)
    )


@pytest.mark.parametrize(
    ("verb", "data", "status"),
    [
        ("pause", {"reason": "maintenance"}, "paused"),
        ("terminate", {"reason": "dup"}, "terminated"),
    ],
)
def test_pause_and_terminate(operator, verb, data, status):
    run = checkout()
    response = operator.post(act(run, verb), data, follow=True)
    assert noted(response, f"is now {status}")
    assert Event.objects.get(run=run, type=f"run.{verb}_requested").payload["by"] == "operator"


def test_resume_after_pause(operator):
    run = checkout()
    workflows.pause_run(run)
    operator.post(act(run, "resume"))
    assert Run.objects.get(pk=run.pk).status == "waiting"


def test_send_a_signal_with_a_json_payload(operator):
    run = checkout()
    form = operator.get(act(run, "signal"))
    assert b'<option value="shipped">' in form.content
    response = operator.post(
        act(run, "signal"), {"name": "shipped", "payload": '{"carrier": "post"}'}, follow=True
    )
    assert noted(response, "received signal “shipped”")
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_bad_json_shows_the_form_again(operator):
    run = checkout()
    response = operator.post(act(run, "signal"), {"name": "shipped", "payload": "{oops"})
    assert response.status_code == 200
    assert b"Enter a valid JSON" in response.content


def test_skip_a_failed_step_with_json_output(operator):
    run = fragile()
    assert run.status == "failed"
    charge = Step.objects.get(run=run, name="charge")
    form = operator.get(act(run, "skip_step") + f"?step={charge.pk}")
    assert f'<option value="{charge.pk}" selected>'.encode() in form.content
    operator.post(act(run, "skip_step"), {"step": charge.pk, "output": json.dumps({"ok": 1})})
    assert Step.objects.get(pk=charge.pk).output == {"ok": 1}
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_retry_a_failed_step(operator):
    run = fragile()
    charge = Step.objects.get(run=run, name="charge")
    response = operator.post(act(run, "retry_step"), {"step": charge.pk}, follow=True)
    assert noted(response, "retries step “charge”")
    assert Event.objects.get(run=run, type="step.retried").payload["by"] == "operator"


def test_rerun_from_a_chosen_step(operator):
    run = checkout()
    workflows.send_signal(run, "shipped")
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "completed"
    charge = Step.objects.get(run=run, name="charge")
    response = operator.post(
        act(run, "rerun"), {"step": charge.pk, "reason": "recharge"}, follow=True
    )
    assert noted(response, "runs again from step")
    assert Event.objects.get(run=run, type="run.rerun_requested").payload["by"] == "operator"


def test_a_step_of_another_run_is_refused(operator):
    first = failed_checkout("F-1")
    other = checkout(order="O-1")
    step = Step.objects.get(run=other, name="reserve")
    response = operator.post(act(first, "rerun"), {"step": step.pk}, follow=True)
    assert response.status_code == 200


def test_retry_a_failed_run(operator):
    run = fragile()
    response = operator.post(act(run, "retry"), follow=True)
    assert noted(response, f"Run {str(run.pk)[:8]} is now")


@pytest.mark.parametrize("role", ["nobody", "viewer", "starter"])
def test_only_operators_may_act(client, role):
    run = checkout()
    signed_in(client, role)
    assert client.get(act(run, "cancel")).status_code == 403
    assert client.post(act(run, "cancel"), {"compensate": "on"}).status_code == 403
    assert Run.objects.get(pk=run.pk).status == "waiting"


# -- bulk ----------------------------------------------------------------------------


def bulk_post(client, runs, action: str, **extra):
    data = {
        "action": action,
        admin.helpers.ACTION_CHECKBOX_NAME: [str(run.pk) for run in runs],
        "index": "0",
        **extra,
    }
    return client.post(reverse(RUNS), data, follow=True)


def test_bulk_cancel_shows_the_dry_run_then_cancels_the_eligible(operator):
    live = [checkout(order=f"L-{n}") for n in range(2)]
    over = failed_checkout("F-1")
    page = bulk_post(operator, [*live, over], "bulk_cancel")
    html = page.content.decode()
    assert 'id="dry-run"' in html
    assert "<strong>3</strong>matched" in html
    assert "<strong>2</strong>eligible" in html
    assert "<strong>1</strong>skipped" in html
    assert "run is compensated; cancel needs" in html
    assert all(Run.objects.get(pk=run.pk).status == "waiting" for run in live)
    done = bulk_post(operator, [*live, over], "bulk_cancel", confirm="yes", compensate="on")
    assert any("Bulk cancel: 3 matched, 2 done, 1 skipped, 0 failed." in n for n in notes(done))
    run_pending()
    for run in live:
        assert Run.objects.get(pk=run.pk).status == "cancelled"
        assert Event.objects.get(run=run, type="run.cancel_requested").payload["by"] == "operator"


def test_bulk_actions_are_offered_to_operators_only(client):
    checkout()
    signed_in(client, "viewer")
    assert b"bulk_cancel" not in client.get(reverse(RUNS)).content
    client.force_login(staff("operator"))
    assert b"bulk_cancel" in client.get(reverse(RUNS)).content


def test_bulk_rerun_asks_for_the_step_first(operator):
    run = fragile()
    page = bulk_post(operator, [run], "bulk_rerun")
    assert b"Name the step to rerun from" in page.content
    checked = bulk_post(operator, [run], "bulk_rerun", from_step="charge", preview="yes")
    assert b"<strong>1</strong>eligible" in checked.content


# -- start ---------------------------------------------------------------------------


def test_start_a_run_from_a_registered_workflow(client):
    signed_in(client, "starter")
    form = client.get(reverse("admin:workflows_run_start"), {"workflow": "console_checkout"})
    assert form.status_code == 200
    assert b'<svg class="wf-graph"' in form.content
    response = client.post(
        reverse("admin:workflows_run_start"),
        {
            "workflow": "console_checkout",
            "input": json.dumps({"order": "N-1", "parcels": [1]}),
            "business_key": "N-1",
        },
    )
    run = Run.objects.get(business_key="N-1")
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:workflows_run_change", args=[run.pk])
    assert run.created_by.username == "starter"


def test_input_the_workflow_refuses_is_a_message(client):
    signed_in(client, "starter")
    response = client.post(
        reverse("admin:workflows_run_start"),
        {"workflow": "warehouse_dispatch", "input": "{}"},
        follow=True,
    )
    assert response.status_code == 200
    assert b"The run was not started: warehouse_dispatch needs an" in response.content
    assert not Run.objects.exists()


@pytest.mark.parametrize("role", ["nobody", "viewer", "operator"])
def test_only_starters_may_start(client, role):
    signed_in(client, role)
    assert client.get(reverse("admin:workflows_run_start")).status_code == 403


@pytest.mark.parametrize(
    ("role", "sees_start", "sees_runs"),
    [("nobody", False, False), ("viewer", False, True), ("starter", True, True)],
)
def test_the_index_shows_what_each_role_may_use(client, role, sees_start, sees_runs):
    signed_in(client, role)
    html = client.get(reverse("admin:index")).content.decode()
    assert (reverse("admin:workflows_run_start") in html) is sees_start
    assert (reverse("admin:workflows_dashboard") in html) is sees_runs


def test_the_run_page_is_not_a_form_and_runs_cannot_be_added_or_deleted(operator):
    run = checkout()
    page = operator.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert b'<input type="submit" value="Save' not in page.content
    assert operator.get(reverse("admin:workflows_run_add")).status_code == 403
    assert operator.post(reverse("admin:workflows_run_delete", args=[run.pk])).status_code == 403
    assert operator.post(reverse("admin:workflows_run_history", args=[run.pk])).status_code in (
        200,
        403,
    )
