"""Only what one may do: the run page, the gate page and the flow page offer a signed-in
user the actions they may use, and list the others under "Not possible now" with why —
the state's reason, or the permission they lack, in the words of the check the verb
makes. Three users, as a newcomer meets them: an admin (everything), an operator
without the gate's permission, a user who may only view.

The last tests pin the pages to the verbs: every action a page offers a user is
accepted when that user posts it, and every one it withholds is refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

import workflows
from tests.support.approvals import SHIP, dispatch_gate
from tests.support.users import staff
from workflows import Task, WaitForSignal, Workflow
from workflows.admin.offers import Offer
from workflows.models import Flow, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

OPERATE = "operating runs needs the permission workflows.operate_run"


class Shipment(Workflow):
    """Waits at once at its gate (decided by ``demo.approve_dispatch``) and for ``paid``."""

    name = "offers_shipment"
    gate = dispatch_gate()
    paid = WaitForSignal("paid", after=[])
    ship = Task(SHIP, after=["gate", "paid"])


def people() -> dict[str, User]:
    """The three users of the issue: each may view runs and every waiting gate."""
    return {
        "admin": User.objects.create_superuser("admin", password="pw"),
        "operator": staff("operator", "view_run", "view_step", "operate_run"),
        "viewer": staff("viewer", "view_run", "view_step"),
    }


def shipment() -> Run:
    run = workflows.start_run(Shipment, {"order": "S-1"})
    run_pending()
    return Run.objects.get(pk=run.pk)


def gate_of(run: Run) -> Step:
    return run.steps.get(name="gate")


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def run_page(client: Client, run: Run) -> tuple[list[Offer], list[Offer], str]:
    page = client.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert page.status_code == 200
    return page.context["allowed_actions"], page.context["refused_actions"], page.content.decode()


def gate_page(client: Client, gate: Step) -> tuple[list[Offer], list[Offer], str]:
    page = client.get(reverse("admin:workflows_approval", args=[gate.pk]))
    assert page.status_code == 200
    return page.context["allowed_actions"], page.context["refused_actions"], page.content.decode()


def flow_page(client: Client, flow: Flow) -> tuple[list[Offer], list[Offer], str]:
    page = client.get(reverse("admin:workflows_flow_change", args=[flow.pk]))
    assert page.status_code == 200
    return page.context["allowed_actions"], page.context["refused_actions"], page.content.decode()


def labels(offers: list[Offer]) -> set[str]:
    return {offer.label for offer in offers}


def reasons(offers: list[Offer]) -> dict[str, str]:
    return {offer.label: offer.reason or "" for offer in offers}


# -- what each page shows each user ----------------------------------------------------


def test_the_admin_is_offered_every_action_the_state_allows():
    admin = signed_in(people()["admin"])
    offered, withheld, _ = run_page(admin, shipment())
    assert labels(offered) == {
        "Cancel",
        "Terminate",
        "Pause",
        "Priority",
        "Decide gate “gate”",
        "Skip “gate”",
        "Skip “paid”",
        "Skip “ship”",
        "Send a signal",
        "Set business key",
    }
    # Withheld by the run's state only, in the guard's words.
    assert labels(withheld) == {"Resume", "Retry", "Rerun", "Dismiss", "Undismiss"}
    assert reasons(withheld)["Resume"] == "run is waiting; resume needs paused"


def test_an_operator_without_the_gates_permission_is_offered_all_but_the_gate():
    operator = signed_in(people()["operator"])
    run = shipment()
    offered, withheld, html = run_page(operator, run)
    assert {"Cancel", "Pause", "Priority", "Skip “paid”", "Send a signal"} <= labels(offered)
    assert not {"Decide gate “gate”", "Skip “gate”"} & labels(offered)
    why = reasons(withheld)
    assert why["Decide gate “gate”"] == (
        "user 'operator' may not decide gate 'gate': it needs permission demo.approve_dispatch"
    )
    assert "workflows.override_gate_rule" in why["Skip “gate”"]
    assert "demo.approve_dispatch" in why["Skip “gate”"]
    # Besides the gate: resume, retry, rerun, dismiss and undismiss (the run is live).
    assert "<summary>Not possible now (7)</summary>" in html
    assert (
        "<li><strong>Decide gate “gate”</strong>: user &#x27;operator&#x27; may not decide "
        "gate &#x27;gate&#x27;: it needs permission demo.approve_dispatch</li>"
    ) in html
    assert reverse("admin:workflows_approval", args=[gate_of(run).pk]) not in html


def test_a_viewer_is_offered_nothing_and_told_what_each_action_needs():
    viewer = signed_in(people()["viewer"])
    run = shipment()
    offered, withheld, html = run_page(viewer, run)
    assert offered == []
    assert 'aria-label="Operator actions"' not in html
    assert '<details class="not-possible" open>' in html  # nothing offered: open
    why = reasons(withheld)
    assert why["Cancel"] == OPERATE
    assert why["Send a signal"] == OPERATE
    # State first, then the permission.
    assert why["Resume"] == f"run is waiting; resume needs paused; {OPERATE}"
    assert why["Decide gate “gate”"].endswith("it needs permission demo.approve_dispatch")
    assert why["Skip “gate”"].startswith(f"{OPERATE}; user 'viewer' may not decide gate")
    assert reverse("admin:workflows_run_act", args=[run.pk, "cancel"]) not in html


def test_the_gate_page_withholds_the_decision_from_those_the_gate_does_not_admit():
    users = people()
    gate = gate_of(shipment())
    offered, withheld, html = gate_page(signed_in(users["admin"]), gate)
    assert labels(offered) == {"Decide gate “gate”", "Claim"} and withheld == []
    assert 'name="decision" value="approve"' in html
    for name in ("operator", "viewer"):
        offered, withheld, html = gate_page(signed_in(users[name]), gate)
        assert offered == []
        assert reasons(withheld) == {
            label: f"user '{name}' may not decide gate 'gate': it needs permission "
            "demo.approve_dispatch"
            for label in ("Decide gate “gate”", "Claim")
        }
        assert "Not possible now (2)" in html
        assert 'name="decision"' not in html


BUILD = (
    "Creating or changing a flow is refused: a flow starts its members as runs, so it "
    "needs the permission workflows.start_run."
)


def test_the_flow_page_names_the_permission_each_flow_action_needs():
    flow = workflows.create_flow("weekly")
    viewer = signed_in(staff("viewer", "view_run"))
    offered, withheld, html = flow_page(viewer, flow)
    assert offered == []
    assert reasons(withheld) == {
        "Cancel flow": OPERATE,
        "Seal flow": BUILD,
    }
    operator = signed_in(staff("operator", "view_run", "operate_run"))
    offered, withheld, html = flow_page(operator, flow)
    assert labels(offered) == {"Cancel flow"}
    assert reasons(withheld) == {"Seal flow": BUILD}
    assert reverse("admin:workflows_flow_act", args=[flow.pk, "cancel"]) in html


def test_a_sealed_flow_lists_sealing_as_done_already():
    flow = workflows.create_flow("sealed")
    workflows.add_to_flow(flow, Shipment, {"order": "S-2"}, member="one")
    workflows.seal_flow(flow)
    admin = signed_in(User.objects.create_superuser("admin", password="pw"))
    offered, withheld, _ = flow_page(admin, flow)
    assert labels(offered) == {"Cancel flow"}
    assert reasons(withheld) == {
        "Seal flow": "the flow is sealed already; it ends once every member has ended"
    }


# -- the pages and the verbs agree -----------------------------------------------------


def _posted(client: Client, url: str, data: dict[str, Any]) -> str:
    """``accepted`` or ``refused``: what the verb said to the user posting ``data``."""
    response = client.post(url, data)
    if response.status_code == 403:
        return "refused"
    assert response.status_code == 302, (url, response.status_code)
    levels = {message.level_tag for message in get_messages(response.wsgi_request)}
    assert len(levels) == 1, levels
    return "accepted" if levels == {"success"} else "refused"


def _form_of(offer: Offer, run: Run) -> dict[str, Any]:
    """What a user fills in the form of ``offer`` on ``run``: valid input, so that only
    the state or the permission can refuse it."""
    if offer.verb == "approve":
        gate = Step.objects.get(pk=offer.step_id)
        return {"version": gate.version, "decision": "approve", "selections": "express"}
    step = {"step": offer.step_id} if offer.step_id else {}
    output = {"decision": "approved", "selections": ["express"]} if offer.step == "gate" else ""
    return {
        "cancel": {"reason": "", "compensate": "on"},
        "rerun": {"step": gate_of(run).pk, "reason": "", "deadline": ""},
        "retry": {"deadline": ""},
        "priority": {"priority": "7"},
        "business_key": {"business_key": "K-7"},
        "skip_step": {**step, "output": json.dumps(output) if output else ""},
        "signal": {"name": "paid", "payload": "{}", "idempotency_key": ""},
    }.get(offer.verb, {"reason": ""})


@pytest.mark.parametrize("name", ["admin", "operator", "viewer"])
def test_each_action_a_run_page_offers_is_accepted_and_each_it_withholds_refused(name):
    user = people()[name]
    client = signed_in(user)
    offered, withheld, _ = run_page(client, shipment())
    for listed in [*offered, *withheld]:
        run = shipment()  # a fresh run for each action: each changes the run
        now_offered, now_withheld, _ = run_page(client, run)
        fresh = next(
            offer
            for offer in [*now_offered, *now_withheld]
            if (offer.verb, offer.step) == (listed.verb, listed.step)
        )
        said = _posted(client, fresh.url.split("?")[0], _form_of(fresh, run))
        assert said == ("accepted" if fresh.offered else "refused"), (name, fresh)


@pytest.mark.parametrize("name", ["admin", "operator", "viewer"])
def test_each_action_the_gate_page_offers_is_accepted_and_each_it_withholds_refused(name):
    client = signed_in(people()[name])
    for verb in ("approve", "claim"):
        gate = gate_of(shipment())
        offered, withheld, _ = gate_page(client, gate)
        [offer] = [offer for offer in [*offered, *withheld] if offer.verb == verb]
        data = _form_of(offer, gate.run) if verb == "approve" else {}
        said = _posted(client, offer.url, data)
        assert said == ("accepted" if offer.offered else "refused"), (name, offer)


@pytest.mark.parametrize(
    "permissions",
    [("view_run",), ("view_run", "operate_run"), ("view_run", "start_run", "operate_run")],
)
def test_each_action_the_flow_page_offers_is_accepted_and_each_it_withholds_refused(
    permissions,
):
    client = signed_in(staff("someone", *permissions))
    for verb, data in (("cancel", {"policy": "cancel_all", "reason": ""}), ("seal", {})):
        flow = workflows.create_flow(f"to {verb}")
        offered, withheld, _ = flow_page(client, flow)
        [offer] = [offer for offer in [*offered, *withheld] if offer.verb == verb]
        said = _posted(client, offer.url, data)
        assert said == ("accepted" if offer.offered else "refused"), (permissions, offer)
