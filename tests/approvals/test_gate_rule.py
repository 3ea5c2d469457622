"""A gate is decided only under its own rule, on every surface.

Skipping a gate decides it, so a skip is checked as a decision is, in Python, the
commands, the API and the admin: a user the rule admits skips it as a decider
(``gate.decided``); one it does not admit needs the separately granted
``workflows.override_gate_rule`` (``gate.overridden``, shown as an override); anyone else
is refused and nothing is written. The other ways a gate's outcome could move (retry,
rerun, bulk, its timeout, signed links, the engine's plain skip) are pinned here too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import import_module
from io import StringIO
from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import workflows
from tests.support.handlers import NOOP
from tests.support.runs import waiting_step
from tests.support.users import staff
from tests.support.webhook_receiver import Receiver
from workflows import Gate, Option, Task, Workflow
from workflows.approvals import decidable_by, gates_for
from workflows.engine.verbs import skip
from workflows.errors import DefinitionError, GateClaimed, InvalidDecision, InvalidTransition
from workflows.hooks import gate_decided, gate_overridden
from workflows.models import Event, Run, Step
from workflows.testing import run_pending
from workflows.webhooks import services as webhooks

pytestmark = pytest.mark.django_db

HERE = "tests.approvals.test_gate_rule"
# The gate's own permission: any permission of an installed app serves.
GATE_PERMISSION = "workflows.change_run"


def ship(ctx):
    return {"shipped_with": ctx.steps["approval"].output["selections"]}


class Dispatch(Workflow):
    name = "gate_rule_dispatch"
    prepare = Task(NOOP)
    approval = Gate(
        prompt="Ship?",
        options=[Option("std", "Standard"), Option("express", "Express")],
        min_selections=1,
        max_selections=1,
        permission=GATE_PERMISSION,
    )
    ship = Task(f"{HERE}.ship")


class Review(Workflow):
    """A gate whose rejection lets the run go on, behind a gate whose rejection fails it."""

    name = "gate_rule_review"
    review = Gate(prompt="Looks right?", assignees=["approver"], on_reject="continue")
    signoff = Gate(prompt="Sign off?", assignees=["approver"])


@pytest.fixture
def people() -> dict[str, User]:
    """Staff users who may operate runs: one the gate admits, one it does not, and one it
    does not admit who holds the override permission; plus a superuser."""
    operate = ("view_run", "start_run", "operate_run")
    return {
        "approver": staff("approver", *operate, "change_run"),
        "ops": staff("ops", *operate),
        "overrider": staff("overrider", *operate, "override_gate_rule"),
        "root": User.objects.create_superuser("root", password="pw"),
    }


def waiting_gate() -> Step:
    return waiting_step(Dispatch, step="approval")


EXPRESS = {"decision": "approved", "selections": ["express"]}


# -- the four surfaces, each returning None on success or the refusal it showed ----------


def via_python(user: User, gate: Step, output: Any) -> str | None:
    try:
        workflows.skip_step(gate, user=user, output=output)
    except PermissionDenied as exc:
        return str(exc)
    return None


def via_command(user: User, gate: Step, output: Any) -> str | None:
    args = [str(gate.pk), "--user", user.username, "--output", json.dumps(output)]
    try:
        call_command("workflows_skip", *args, stdout=StringIO())
    except CommandError as exc:
        return str(exc)
    return None


def via_api(user: User, gate: Step, output: Any) -> str | None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    response = client.post(f"/api/steps/{gate.pk}/skip/", {"output": output}, format="json")
    if response.status_code == 200:
        return None
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "permission_denied"
    return response.json()["error"]["message"]


def via_admin(user: User, gate: Step, output: Any) -> str | None:
    client = Client()
    client.force_login(user)
    url = reverse("admin:workflows_run_act", args=[gate.run_id, "skip_step"])
    form = client.get(f"{url}?step={gate.pk}")
    assert form.status_code == 200
    response = client.post(url, {"step": gate.pk, "output": json.dumps(output)}, follow=True)
    assert response.status_code == 200
    notes = [str(message) for message in response.context["messages"]]
    refusals = [note for note in notes if "refused" in note]
    if refusals:
        return refusals[0]
    skipped = Step.objects.get(pk=gate.pk)
    how = ", overriding the gate's rule" if skipped.decided_via == "override" else ""
    assert f"skipped gate “approval” (approved){how}." in notes[0], notes
    return None


SURFACES: dict[str, Callable[[User, Step, Any], str | None]] = {
    "python": via_python,
    "command": via_command,
    "api": via_api,
    "admin": via_admin,
}


def history(gate: Step) -> list[str]:
    return list(
        Event.objects.filter(run_id=gate.run_id).order_by("id").values_list("type", flat=True)
    )


@pytest.mark.parametrize("surface", SURFACES)
def test_a_user_the_rule_does_not_admit_cannot_skip_the_gate(people, surface):
    gate = waiting_gate()
    before = history(gate)
    refusal = SURFACES[surface](people["ops"], gate, EXPRESS)
    assert refusal is not None
    assert "may not decide gate 'approval'" in refusal
    assert "workflows.override_gate_rule" in refusal
    after = Step.objects.get(pk=gate.pk)
    assert (after.status, after.version, after.decision) == ("waiting", gate.version, "")
    assert history(gate) == before
    assert Run.objects.get(pk=gate.run_id).status == "waiting"


@pytest.mark.parametrize("surface", SURFACES)
def test_a_decider_skips_the_gate_as_a_decision(people, surface):
    gate = waiting_gate()
    assert SURFACES[surface](people["approver"], gate, EXPRESS) is None
    after = Step.objects.get(pk=gate.pk)
    assert (after.status, after.decision, after.decided_via) == ("completed", "approved", "skip")
    assert (after.decided_by, after.selections) == (people["approver"], ["express"])
    assert after.output["selections"] == ["express"]
    decided = Event.objects.get(run_id=gate.run_id, step_id=gate.pk, type="gate.decided")
    assert (decided.payload["by"], decided.payload["via"]) == ("approver", "skip")
    assert not Event.objects.filter(run_id=gate.run_id, type="gate.overridden").exists()
    run_pending()
    run = Run.objects.get(pk=gate.run_id)
    assert run.status == "completed"
    assert run.steps.get(name="ship").output == {"shipped_with": ["express"]}


@pytest.mark.parametrize("surface", SURFACES)
def test_an_override_is_recorded_and_shown_as_one(people, surface):
    gate = waiting_gate()
    assert SURFACES[surface](people["overrider"], gate, EXPRESS) is None
    after = Step.objects.get(pk=gate.pk)
    assert (after.status, after.decision, after.decided_via) == (
        "completed",
        "approved",
        "override",
    )
    assert after.decided_by == people["overrider"]
    types = history(gate)
    assert "gate.overridden" in types and "step.skipped" in types
    assert "gate.decided" not in types
    overridden = Event.objects.get(run_id=gate.run_id, type="gate.overridden")
    assert overridden.payload["by"] == "overrider"
    assert overridden.payload["rule"] == {
        "permission": GATE_PERMISSION,
        "assignees": {"users": [], "groups": []},
    }


def test_the_run_page_says_who_overrode_the_gate_s_rule(people, client):
    gate = waiting_gate()
    workflows.skip_step(gate, user=people["overrider"], output=EXPRESS)
    client.force_login(people["root"])
    page = client.get(reverse("admin:workflows_run_change", args=[gate.run_id]))
    text = page.content.decode()
    assert "approved: skipped by overrider, overriding the gate's rule: express" in text
    assert 'class="wf-badge st-override"' in text
    assert "approval (gate): override" in text  # its node in the graph


def test_the_run_page_shows_a_decider_s_skip_as_a_skip(people, client):
    gate = waiting_gate()
    workflows.skip_step(gate, user=people["approver"], output=EXPRESS)
    client.force_login(people["root"])
    text = client.get(reverse("admin:workflows_run_change", args=[gate.run_id])).content.decode()
    assert "approved: skipped by approver: express" in text
    assert "st-override" not in text


def test_an_override_fires_its_own_hook_and_webhook_never_gate_decided(people):
    fired: dict[str, list[int]] = {"decided": [], "overridden": []}

    def on_decided(sender, step_id, **kwargs):
        fired["decided"].append(step_id)

    def on_overridden(sender, step_id, event, **kwargs):
        fired["overridden"].append(step_id)

    gate_decided.connect(on_decided)
    gate_overridden.connect(on_overridden)
    try:
        with Receiver() as receiver:
            endpoint = webhooks.create_endpoint(
                url=receiver.url, event_types=["gate.decided", "gate.overridden"]
            )
            receiver.secret = endpoint.secret
            gate = waiting_gate()
            workflows.skip_step(gate, user=people["overrider"], output=EXPRESS)
            run_pending()
            received = [request.json for request in receiver.requests]
    finally:
        gate_decided.disconnect(on_decided)
        gate_overridden.disconnect(on_overridden)
    assert fired == {"decided": [], "overridden": [gate.pk]}
    assert [message["type"] for message in received] == ["gate.overridden"]
    assert received[0]["data"]["step"] == "approval"


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (None, "needs exactly 1 selection, got 0"),
        ({"selections": ["drone"]}, "has no option 'drone'"),
        ({"selections": ["std", "express"]}, "needs exactly 1 selection, got 2"),
        ({"decision": "approved", "selections": "express"}, "must be a list of option values"),
        ({"shipped": True}, "unknown keys ['shipped']"),
        ({"decision": "maybe"}, "must be one of ['approved', 'rejected']"),
        ({"decision": "rejected"}, "fails its run when rejected: reject it instead"),
        ("yes", "must be an object with decision, selections, feedback"),
    ],
)
def test_a_skip_s_output_must_be_a_decision_the_gate_accepts(people, output, message):
    gate = waiting_gate()
    before = history(gate)
    with pytest.raises(InvalidDecision) as refused:
        workflows.skip_step(gate, user=people["approver"], output=output)
    assert message in refused.value.message
    assert Step.objects.get(pk=gate.pk).status == "waiting"
    assert history(gate) == before


def test_the_api_answers_a_bad_skip_output_with_400(people):
    gate = waiting_gate()
    client = APIClient()
    client.force_authenticate(people["approver"])
    response = client.post(
        f"/api/steps/{gate.pk}/skip/", {"output": {"selections": ["drone"]}}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_decision"


def test_a_rejection_by_skip_continues_a_gate_that_routes_on_rejections(people):
    run = workflows.start_run(Review)
    run_pending()
    review = run.steps.get(name="review")
    workflows.skip_step(
        review, user=people["approver"], output={"decision": "rejected", "feedback": "no"}
    )
    after = Step.objects.get(pk=review.pk)
    assert (after.status, after.decision, after.output["feedback"]) == (
        "completed",
        "rejected",
        "no",
    )
    assert run.steps.get(name="signoff").status == "waiting"


def test_a_gate_not_yet_reached_carries_its_rule(people):
    run = workflows.start_run(Dispatch)  # 'approval' waits behind 'prepare'
    gate = run.steps.get(name="approval")
    assert (gate.status, gate.permission) == ("pending", GATE_PERMISSION)
    with pytest.raises(PermissionDenied):
        workflows.skip_step(gate, user=people["ops"], output=EXPRESS)
    assert Step.objects.get(pk=gate.pk).status == "pending"
    workflows.skip_step(gate, user=people["approver"], output=EXPRESS)
    assert Step.objects.get(pk=gate.pk).decided_via == "skip"


def test_a_skip_without_a_user_is_refused_and_the_command_says_so(people):
    gate = waiting_gate()
    with pytest.raises(PermissionDenied, match="needs a signed-in, active user"):
        workflows.skip_step(gate, output=EXPRESS)
    with pytest.raises(CommandError, match="needs a signed-in, active user"):
        call_command("workflows_skip", str(gate.pk), stdout=StringIO())
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_a_skip_respects_a_claim_by_someone_else(people):
    gate = waiting_gate()
    workflows.claim_gate(gate, people["root"])
    with pytest.raises(GateClaimed, match="claimed by root"):
        workflows.skip_step(gate, user=people["approver"], output=EXPRESS)
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_the_engine_s_plain_skip_refuses_a_gate(people):
    gate = waiting_gate()
    with pytest.raises(InvalidTransition, match="skipping it decides it"):
        skip.skip_step(gate.pk, output=EXPRESS, user=people["root"])
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_a_superuser_holds_the_override_but_decides_within_the_rule(people):
    gate = waiting_gate()
    workflows.skip_step(gate, user=people["root"], output=EXPRESS)
    assert Step.objects.get(pk=gate.pk).decided_via == "skip"


# -- the other ways a gate's outcome could move ------------------------------------------


def rejected_signoff(people) -> Step:
    run = workflows.start_run(Review)
    run_pending()
    workflows.approve_gate(run.steps.get(name="review"), user=people["approver"])
    signoff = run.steps.get(name="signoff")
    workflows.reject_gate(signoff, user=people["approver"], feedback="wrong address")
    assert Run.objects.get(pk=run.pk).status == "failed"
    return Step.objects.get(pk=signoff.pk)


def assert_reopened_under_its_rule(people, gate: Step) -> None:
    """The gate waits for a new decision that only its rule admits; the earlier one stays
    in the history."""
    reopened = Step.objects.get(pk=gate.pk)
    assert (reopened.status, reopened.decision, reopened.decided_via) == ("waiting", "", "")
    assert reopened.decided_by is None
    assert [gate.pk] == [waiting.step for waiting in gates_for(people["approver"])]
    assert gates_for(people["ops"]) == []
    with pytest.raises(PermissionDenied):
        workflows.approve_gate(reopened, user=people["ops"])
    decided = Event.objects.filter(step_id=gate.pk, type="gate.decided")
    assert [event.payload["decision"] for event in decided] == ["rejected"]


def test_retrying_a_rejected_gate_reopens_it_for_a_decision(people):
    gate = rejected_signoff(people)
    workflows.retry_step(gate, user=people["ops"])
    assert_reopened_under_its_rule(people, gate)


def test_retrying_a_run_failed_by_a_rejection_reopens_the_gate(people):
    gate = rejected_signoff(people)
    workflows.retry_run(gate.run_id, user=people["ops"])
    assert_reopened_under_its_rule(people, gate)


def test_a_bulk_retry_reopens_the_gate_and_decides_nothing(people):
    gate = rejected_signoff(people)
    runs = Run.objects.filter(pk=gate.run_id)
    result = workflows.bulk("retry", runs, dry_run=False, user=people["ops"])
    assert result.done == 1
    assert_reopened_under_its_rule(people, gate)


def test_rerunning_from_a_gate_reopens_it_for_a_decision(people):
    gate = rejected_signoff(people)
    workflows.rerun_from(gate.run_id, "signoff", user=people["ops"])
    assert_reopened_under_its_rule(people, gate)


def test_a_skip_overturning_a_rejection_names_it(people):
    gate = rejected_signoff(people)
    workflows.skip_step(gate, user=people["overrider"], output=None)
    overridden = Event.objects.get(step_id=gate.pk, type="gate.overridden")
    assert overridden.payload["overturned"] == {"decision": "rejected", "decided_via": "decision"}
    assert Run.objects.get(pk=gate.run_id).status != "failed"


def test_a_timeout_cannot_approve_a_gate_that_needs_selections():
    with pytest.raises(DefinitionError, match="on_timeout='approve' approves with no selections"):

        class Approves(Workflow):
            name = "gate_rule_approves_on_timeout"
            pick = Gate(options=[Option("a")], min_selections=1, on_timeout="approve")


def test_an_approval_link_for_a_user_the_rule_does_not_admit_decides_nothing(people, client):
    gate = waiting_gate()
    link = workflows.approval_link(gate, people["ops"])
    client.force_login(people["ops"])
    assert client.get(link).status_code == 403
    assert client.post(link, {"decision": "approve", "selections": "express"}).status_code == 403
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_the_api_refuses_an_operator_s_approval(people):
    gate = waiting_gate()
    client = APIClient()
    client.force_authenticate(people["ops"])
    response = client.post(
        f"/api/gates/{gate.pk}/approve/", {"selections": ["express"]}, format="json"
    )
    assert response.status_code == 403
    assert Step.objects.get(pk=gate.pk).status == "waiting"


def test_the_migration_gives_gates_not_yet_reached_their_rule(people):
    """Gates created before a gate carried its rule from the start get it on migrate."""
    migration = import_module("workflows.migrations.0013_gate_decided_via_and_rule_override")
    run = workflows.start_run(Dispatch)
    gate = run.steps.get(name="approval")
    Step.objects.filter(pk=gate.pk).update(permission="", assignees={})
    admitted = Step.objects.filter(pk=gate.pk).filter(decidable_by(people["ops"]))
    assert admitted.exists()  # as such an old row, it looked open to anyone
    migration.fill_gate_rules(apps, SimpleNamespace(connection=connection))
    filled = Step.objects.get(pk=gate.pk)
    assert (filled.permission, filled.version) == (GATE_PERMISSION, gate.version + 1)
    assert not admitted.exists()
    with pytest.raises(PermissionDenied):
        workflows.skip_step(filled, user=people["ops"], output=EXPRESS)


def test_the_api_says_how_a_gate_was_decided(people):
    gate = waiting_gate()
    workflows.skip_step(gate, user=people["overrider"], output=EXPRESS)
    client = APIClient()
    client.force_authenticate(people["root"])
    step = client.get(f"/api/steps/{gate.pk}/").json()
    assert (step["decision"], step["decided_via"], step["decided_by"]) == (
        "approved",
        "override",
        "overrider",
    )
    decision = client.get(f"/api/gates/{gate.pk}/").json()["decision"]
    assert (decision["value"], decision["via"], decision["by"]) == (
        "approved",
        "override",
        "overrider",
    )
    pending = workflows.start_run(Dispatch).steps.get(name="approval")
    assert client.get(f"/api/steps/{pending.pk}/").json()["decided_via"] is None
