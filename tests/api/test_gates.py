"""``/api/gates/``: who sees which gate, claims, decisions and every refusal."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import workflows
from tests.api.conftest import user_with
from tests.api.test_api_basics import assert_error
from tests.support.handlers import NOOP
from workflows import Gate, Option, Task, Workflow
from workflows.models import Event, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


class Refund(Workflow):
    """Decided by holders of a permission; one or two options; the run goes on after."""

    name = "api_gates_refund"
    gate = Gate(
        prompt="Refund {input[order]}?",
        options=[Option("full", "Full"), Option("partial", "Partial"), Option("credit")],
        min_selections=1,
        max_selections=2,
        timeout=timedelta(hours=4),
        permission="auth.change_user",
    )
    pay = Task(NOOP, after=["gate"])


class Ship(Workflow):
    """Decided by one named assignee."""

    name = "api_gates_ship"
    gate = Gate(prompt="Ship {input[order]}?", assignees=["assigned_user"])


class Nothing(Workflow):
    """No gate: its task step is not a gate."""

    name = "api_gates_nothing"
    work = Task(NOOP)


def waiting(workflow: type[Workflow], order: str) -> Step:
    run = workflows.start_run(workflow, {"order": order}, business_key=order)
    run_pending()
    return run.steps.get(name="gate")


def client_of(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def refund() -> Step:
    return waiting(Refund, "R-1")


@pytest.fixture
def ship() -> Step:
    return waiting(Ship, "S-1")


@pytest.fixture
def approver() -> APIClient:
    """Holds the refund gate's permission."""
    return client_of(user_with("approver", ["change_user"]))


@pytest.fixture
def second_approver() -> APIClient:
    return client_of(user_with("approver-2", ["change_user"]))


@pytest.fixture
def assigned_user() -> APIClient:
    """The ship gate's assignee."""
    return client_of(user_with("assigned_user", []))


def url(gate: Step, verb: str = "") -> str:
    return f"/api/gates/{gate.pk}/" + (f"{verb}/" if verb else "")


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [gate["id"] for gate in response.json()["results"]]


# -- listing -----------------------------------------------------------------------------


def test_each_caller_lists_the_gates_they_may_decide(refund, ship, approver, assigned_user, api):
    assert ids(approver.get("/api/gates/")) == [refund.pk]
    assert ids(assigned_user.get("/api/gates/")) == [ship.pk]
    assert ids(api("nobody").get("/api/gates/")) == []
    assert ids(api("viewer").get("/api/gates/")) == []  # viewing runs is not deciding
    root = client_of(User.objects.create_superuser("root"))
    assert ids(root.get("/api/gates/")) == [refund.pk, ship.pk]


def test_the_list_is_the_approvals_list_oldest_first_and_paged(refund, ship, approver):
    later = waiting(Refund, "R-2")
    earlier = waiting(Refund, "R-0")
    Step.objects.filter(pk=earlier.pk).update(started_at=timezone.now() - timedelta(days=1))
    holder = User.objects.get(username="approver")
    expected = [gate.step for gate in workflows.gates_for(holder)]
    assert expected == [earlier.pk, refund.pk, later.pk]
    first = approver.get("/api/gates/?page_size=2")
    assert ids(first) == expected[:2]
    assert ids(approver.get(first.json()["next"])) == expected[2:]
    workflows.approve_gate(refund, user=holder, selections=["full"])
    assert ids(approver.get("/api/gates/")) == [earlier.pk, later.pk]


def test_a_gate_shows_its_prompt_options_claim_decision_and_version(refund, approver):
    body = approver.get(url(refund)).json()
    due = timezone.now() + timedelta(hours=4)
    assert abs(timezone.datetime.fromisoformat(body.pop("due_at")) - due) < timedelta(minutes=1)
    assert timezone.datetime.fromisoformat(body.pop("waiting_since")) <= timezone.now()
    assert body == {
        "id": refund.pk,
        "name": "gate",
        "run": str(refund.run_id),
        "workflow": "api_gates_refund",
        "business_key": "R-1",
        "prompt": "Refund R-1?",
        "options": [
            {"value": "full", "label": "Full"},
            {"value": "partial", "label": "Partial"},
            {"value": "credit", "label": "credit"},
        ],
        "min_selections": 1,
        "max_selections": 2,
        "claim": None,
        "status": "waiting",
        "decision": None,
        "version": refund.version,
    }


def test_other_statuses_need_the_view_permission(refund, ship, approver, api):
    workflows.approve_gate(refund, user=User.objects.get(username="approver"), selections=["full"])
    error = assert_error(approver.get("/api/gates/?status=decided"), 403, "permission_denied")
    assert "workflows.view_run" in error["message"]
    assert ids(api("viewer").get("/api/gates/?status=decided")) == [refund.pk]
    assert ids(api("viewer").get("/api/gates/?status=timed_out")) == []
    error = assert_error(api("viewer").get("/api/gates/?status=nope"), 400, "validation_error")
    assert "status" in error["details"]


def test_a_gate_that_timed_out_or_was_never_reached_has_its_own_status(api):
    gate = waiting(Refund, "T-1")
    run_pending(until=timezone.now() + timedelta(hours=5))  # on_timeout="reject"
    decided = api("viewer").get(url(gate)).json()
    assert decided["status"] == "decided"
    assert decided["decision"]["value"] == "rejected"
    assert decided["decision"]["by"] is None  # its timeout decided it
    pay = Step.objects.get(run_id=gate.run_id, name="pay")
    assert ids(api("viewer").get("/api/gates/?status=closed")) == []
    assert_error(api("viewer").get(url(pay)), 404, "gate_not_found")  # a task, not a gate


# -- who may see a gate -------------------------------------------------------------------


def test_anonymous_callers_must_authenticate(refund, api):
    anonymous = api("anonymous")
    assert_error(anonymous.get("/api/gates/"), 401, "not_authenticated")
    assert_error(anonymous.get(url(refund)), 401, "not_authenticated")
    assert_error(
        anonymous.post(url(refund, "approve"), {}, format="json"), 401, "not_authenticated"
    )


def test_a_gate_the_caller_may_neither_decide_nor_view_is_not_found(refund, api):
    for path in (url(refund), url(refund, "claim"), url(refund, "approve")):
        call = api("nobody").get if path == url(refund) else api("nobody").post
        error = assert_error(call(path), 404, "gate_not_found")
        assert error["details"] == {"gate": str(refund.pk)}
    nothing = workflows.start_run(Nothing).steps.get()
    for missing in (nothing.pk, 10**30, "abc", "٣"):
        assert_error(api("viewer").get(f"/api/gates/{missing}/"), 404, "gate_not_found")


def test_a_viewer_sees_a_gate_but_may_not_decide_it(refund, api):
    assert api("viewer").get(url(refund)).json()["status"] == "waiting"
    for verb in ("claim", "approve", "reject"):
        error = assert_error(
            api("viewer").post(url(refund, verb), {}, format="json"), 403, "permission_denied"
        )
        assert "may not decide gate 'gate'" in error["message"]
    assert not Event.objects.filter(type__startswith="gate.").exists()


# -- claims ------------------------------------------------------------------------------


def test_a_claim_is_recorded_with_the_address_and_released(refund, approver, second_approver):
    claimed = approver.post(url(refund, "claim"), REMOTE_ADDR="10.0.0.7")
    assert claimed.status_code == 200, claimed.content
    claim = claimed.json()["claim"]
    assert claim["by"] == "approver" and claim["at"]
    assert claimed.json()["version"] > refund.version
    assert Event.objects.get(type="gate.claimed").payload["address"] == "10.0.0.7"
    assert_error(second_approver.post(url(refund, "claim")), 409, "gate_claimed")
    assert_error(second_approver.post(url(refund, "unclaim")), 409, "gate_claimed")
    assert_error(
        second_approver.post(url(refund, "approve"), {"selections": ["full"]}, format="json"),
        409,
        "gate_claimed",
    )
    released = approver.post(url(refund, "unclaim"))
    assert released.status_code == 200 and released.json()["claim"] is None
    assert Event.objects.get(type="gate.unclaimed").payload["address"] == "127.0.0.1"


def test_a_viewer_who_may_not_decide_may_not_release_a_claim(refund, approver, api):
    """Releasing is part of deciding: a 403, whether the gate is claimed or not."""
    assert_error(api("viewer").post(url(refund, "unclaim")), 403, "permission_denied")
    assert approver.post(url(refund, "claim")).status_code == 200
    assert_error(api("viewer").post(url(refund, "unclaim")), 403, "permission_denied")
    assert approver.get(url(refund)).json()["claim"]["by"] == "approver"
    assert not Event.objects.filter(type="gate.unclaimed").exists()


def test_the_override_permission_alone_releases_no_claim(refund, approver):
    """``override_gate_claim`` lets a decider release another's claim, nobody else."""
    overrider = client_of(user_with("overrider", ["view_run", "override_gate_claim"]))
    assert approver.post(url(refund, "claim")).status_code == 200
    assert_error(overrider.post(url(refund, "unclaim")), 403, "permission_denied")
    deciding_overrider = client_of(
        user_with("deciding-overrider", ["change_user", "override_gate_claim"])
    )
    released = deciding_overrider.post(url(refund, "unclaim"))
    assert released.status_code == 200 and released.json()["claim"] is None


# -- decisions ---------------------------------------------------------------------------


def test_an_approval_is_recorded_with_who_and_where_and_the_run_moves_on(refund, approver):
    response = approver.post(
        url(refund, "approve"),
        {"selections": ["partial", "credit"], "feedback": "ok", "expected_version": refund.version},
        format="json",
        REMOTE_ADDR="2001:db8::1",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "decided"
    decision = body["decision"]
    assert decision.pop("at")
    assert decision == {
        "value": "approved",
        "via": "decision",
        "by": "approver",
        "address": "2001:db8::1",
        "selections": ["partial", "credit"],
        "feedback": "ok",
    }
    assert Step.objects.get(pk=refund.pk).decided_from == "2001:db8::1"
    assert Event.objects.get(type="gate.decided").payload["address"] == "2001:db8::1"
    assert Step.objects.get(run_id=refund.run_id, name="pay").status == "ready"


def test_a_rejection_fails_the_run(ship, assigned_user):
    response = assigned_user.post(url(ship, "reject"), {"feedback": "no stock"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["decision"]["value"] == "rejected"
    run_pending()
    assert Step.objects.get(pk=ship.pk).run.status == "failed"


def test_a_second_decision_finds_the_gate_decided(ship, assigned_user):
    assert assigned_user.post(url(ship, "approve"), format="json").status_code == 200
    error = assert_error(
        assigned_user.post(url(ship, "reject"), {"feedback": "late"}, format="json"),
        409,
        "gate_already_decided",
    )
    assert error["details"]["decision"] == "approved"
    assert_error(assigned_user.post(url(ship, "claim")), 409, "gate_already_decided")


def test_a_decision_on_a_stale_version_is_refused(refund, approver, second_approver):
    read = approver.get(url(refund)).json()["version"]
    assert second_approver.post(url(refund, "claim")).status_code == 200
    assert second_approver.post(url(refund, "unclaim")).status_code == 200
    for verb, body in (("approve", {"selections": ["full"]}), ("reject", {})):
        error = assert_error(
            approver.post(url(refund, verb), {**body, "expected_version": read}, format="json"),
            409,
            "stale_version",
        )
        assert error["details"] == {
            "step": refund.name,
            "expected_version": read,
            "version": read + 2,
        }
    assert Step.objects.get(pk=refund.pk).status == "waiting"
    assert not Event.objects.filter(type="gate.decided").exists()


@pytest.mark.parametrize(
    ("selections", "message"),
    [
        (["gold"], "has no option 'gold'"),
        ([], "needs 1 to 2 selections, got 0"),
        (["full", "partial", "credit"], "needs 1 to 2 selections, got 3"),
        (["full", "full"], "selected twice"),
    ],
)
def test_selections_that_do_not_fit_the_options_are_an_invalid_decision(
    refund, approver, selections, message
):
    error = assert_error(
        approver.post(url(refund, "approve"), {"selections": selections}, format="json"),
        400,
        "invalid_decision",
    )
    assert message in error["message"]
    assert Step.objects.get(pk=refund.pk).status == "waiting"


@pytest.mark.parametrize(
    ("verb", "body", "field"),
    [
        ("approve", {"selections": ["full"], "feedbak": "typo"}, "feedbak"),
        ("approve", {"selections": [1]}, "selections"),
        ("approve", {"selections": "full"}, "selections"),
        ("approve", {"selections": ["full"], "feedback": 7}, "feedback"),
        ("approve", {"selections": ["full"], "expected_version": "x"}, "expected_version"),
        ("reject", {"selections": ["full"]}, "selections"),
        ("claim", {"user": "someone"}, "user"),
        ("unclaim", {"force": True}, "force"),
    ],
)
def test_unknown_and_mistyped_fields_are_validation_errors(refund, approver, verb, body, field):
    error = assert_error(
        approver.post(url(refund, verb), body, format="json"), 400, "validation_error"
    )
    assert field in error["details"]
    assert not Event.objects.filter(type__startswith="gate.").exists()


def test_the_schema_documents_every_gate_route(api):
    paths = api("viewer").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    documented = paths.json()["paths"]
    for verb in ("claim", "unclaim", "approve", "reject"):
        assert f"/api/gates/{{id}}/{verb}/" in documented
    approve = documented["/api/gates/{id}/approve/"]["post"]
    assert "application/json" in approve["requestBody"]["content"]
    assert "200" in approve["responses"] and "409" in approve["responses"]
