"""The approvals list (``gates_for``) and gate claims: who may decide, who holds a gate."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import partial

import pytest
from django.contrib.auth.models import AnonymousUser, Group, Permission, User
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support.commands import run_command
from tests.support.runs import waiting_step
from workflows import (
    Gate,
    GateAlreadyDecided,
    GateClaimed,
    InvalidInput,
    StaleState,
    Workflow,
)
from workflows.approvals import waiting_gates
from workflows.engine.nodes.gate import decide_gate
from workflows.models import Event, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.approvals.test_gate_claims"


class ByPermission(Workflow):
    name = "claims_by_permission"
    gate = Gate(prompt="Refund {input[order]}?", permission="auth.change_user")


class ByUser(Workflow):
    name = "claims_by_user"
    gate = Gate(prompt="Ship {input[order]}?", assignees=["assignee"])


class ByGroup(Workflow):
    name = "claims_by_group"
    gate = Gate(prompt="Pack {input[order]}?", assignees=["group:packers"])


class Open(Workflow):
    name = "claims_open"
    gate = Gate(prompt="Publish {input[order]}?", timeout=timedelta(hours=4))


def waiting(workflow: type[Workflow], order: str = "A-1") -> Step:
    """Start a run of ``workflow`` and return its gate, waiting."""
    return waiting_step(workflow, {"order": order}, business_key=order, step="gate")


def fresh(user: User) -> User:
    """The user read again, without Django's cached permissions."""
    return User.objects.get(pk=user.pk)


def names(gates) -> list[str]:
    return [gate.prompt for gate in gates]


@pytest.fixture
def gates() -> dict[str, Step]:
    return {
        "permission": waiting(ByPermission, "P-1"),
        "user": waiting(ByUser, "U-1"),
        "group": waiting(ByGroup, "G-1"),
        "open": waiting(Open, "O-1"),
    }


@pytest.fixture
def assignee() -> User:
    return User.objects.create_user("assignee")


@pytest.fixture
def stranger() -> User:
    return User.objects.create_user("stranger")


@pytest.fixture
def overrider() -> User:
    user = User.objects.create_user("olga")
    user.user_permissions.add(Permission.objects.get(codename="override_gate_claim"))
    return fresh(user)


# -- the approvals list ------------------------------------------------------------------


def test_a_permission_holder_sees_the_permission_gate_and_the_open_one(gates):
    holder = User.objects.create_user("holder")
    holder.user_permissions.add(Permission.objects.get(codename="change_user"))
    assert names(workflows.gates_for(fresh(holder))) == ["Refund P-1?", "Publish O-1?"]


def test_a_permission_held_through_a_group_counts_too(gates):
    member = User.objects.create_user("member")
    staff = Group.objects.create(name="staff")
    staff.permissions.add(Permission.objects.get(codename="change_user"))
    member.groups.add(staff)
    assert names(workflows.gates_for(fresh(member))) == ["Refund P-1?", "Publish O-1?"]


def test_an_assignee_sees_the_gate_naming_them(gates, assignee):
    assert names(workflows.gates_for(assignee)) == ["Ship U-1?", "Publish O-1?"]


def test_a_group_member_sees_the_group_gate(gates):
    packer = User.objects.create_user("paula")
    packer.groups.add(Group.objects.create(name="packers"), Group.objects.create(name="other"))
    assert names(workflows.gates_for(packer)) == ["Pack G-1?", "Publish O-1?"]


def test_anyone_signed_in_sees_only_the_open_gate(gates, stranger):
    listed = workflows.gates_for(stranger)
    assert names(listed) == ["Publish O-1?"]
    (gate,) = listed
    assert gate.step == gates["open"].pk
    assert gate.run == str(gates["open"].run_id)
    assert gate.business_key == "O-1"
    assert gate.workflow == "claims_open"
    assert abs(gate.due_at - (timezone.now() + timedelta(hours=4))) < timedelta(minutes=1)
    assert gate.claimed_by is None


def test_superusers_see_every_gate_and_nobody_else_sees_anything(gates):
    root = User.objects.create_superuser("root")
    assert len(workflows.gates_for(root)) == 4
    assert workflows.gates_for(AnonymousUser()) == []
    assert workflows.gates_for(User.objects.create_user("gone", is_active=False)) == []
    assert workflows.gates_for(None) == []


def test_the_list_agrees_with_who_may_decide(gates, stranger):
    with pytest.raises(PermissionDenied, match="may not decide gate 'gate'"):
        workflows.approve_gate(gates["user"], user=stranger)
    root = User.objects.create_superuser("root")
    workflows.approve_gate(gates["user"], user=root)  # a superuser decides every gate


def test_only_waiting_gates_are_listed_oldest_first(gates, assignee):
    later = waiting(Open, "O-2")
    now = timezone.now()
    Step.objects.filter(pk=later.pk).update(started_at=now - timedelta(days=3))
    Step.objects.filter(pk=gates["open"].pk).update(started_at=now - timedelta(days=1))
    Step.objects.filter(pk=gates["user"].pk).update(started_at=now - timedelta(days=2))
    assert names(workflows.gates_for(assignee)) == ["Publish O-2?", "Ship U-1?", "Publish O-1?"]
    workflows.approve_gate(later, user=assignee)
    assert names(workflows.gates_for(assignee)) == ["Ship U-1?", "Publish O-1?"]
    assert len(waiting_gates()) == 4


def test_the_list_costs_the_same_queries_for_many_gates(assignee):
    def cost(count: int) -> int:
        for index in range(count):
            waiting([ByUser, ByGroup, Open, ByPermission][index % 4], f"N-{index}")
        member = User.objects.get(pk=assignee.pk)
        with CaptureQueriesContext(connection) as queries:
            listed = workflows.gates_for(member)
        assert (
            len(listed)
            == Step.objects.filter(
                status="waiting", run__workflow_name__in=["claims_by_user", "claims_open"]
            ).count()
        )
        return len(queries)

    assignee.groups.add(Group.objects.create(name="readers"))
    assert cost(4) == cost(40)


# -- claims ------------------------------------------------------------------------------


def test_a_claim_is_recorded_and_listed(gates, assignee):
    gate = workflows.claim_gate(gates["user"], assignee, address="10.0.0.7")
    assert gate.claimed_by == assignee
    assert gate.claimed_at is not None
    event = Event.objects.get(step=gate, type="gate.claimed")
    assert event.payload == {
        "by": "assignee",
        "at": gate.claimed_at.isoformat(),
        "address": "10.0.0.7",
    }
    (listed, _open) = workflows.gates_for(assignee)
    assert (listed.claimed_by, listed.claimed_at) == ("assignee", gate.claimed_at)


def test_claiming_ones_own_claim_again_changes_nothing(gates, assignee):
    first = workflows.claim_gate(gates["open"], assignee)
    again = workflows.claim_gate(gates["open"], assignee)
    assert (again.version, again.claimed_at) == (first.version, first.claimed_at)
    assert Event.objects.filter(type="gate.claimed").count() == 1


def test_a_gate_claimed_by_someone_else_cannot_be_claimed(gates, assignee, stranger):
    workflows.claim_gate(gates["open"], assignee)
    with pytest.raises(GateClaimed, match="gate 'gate' is claimed by assignee") as refused:
        workflows.claim_gate(gates["open"], stranger)
    assert refused.value.code == "gate_claimed"
    assert Step.objects.get(pk=gates["open"].pk).claimed_by == assignee


def test_only_those_who_may_decide_may_claim(gates, stranger):
    with pytest.raises(PermissionDenied, match="may not decide gate 'gate'"):
        workflows.claim_gate(gates["user"], stranger)
    with pytest.raises(PermissionDenied, match="signed-in, active user"):
        workflows.claim_gate(gates["open"], AnonymousUser())
    assert not Event.objects.filter(type="gate.claimed").exists()


def test_a_decided_gate_cannot_be_claimed_or_released(gates, assignee):
    workflows.claim_gate(gates["open"], assignee)
    workflows.approve_gate(gates["open"], user=assignee)
    with pytest.raises(GateAlreadyDecided):
        workflows.claim_gate(gates["open"], assignee)
    with pytest.raises(GateAlreadyDecided):
        workflows.unclaim_gate(gates["open"], assignee)


def test_a_timed_out_gate_cannot_be_claimed(gates, assignee):
    run_pending(until=timezone.now() + timedelta(hours=5))
    with pytest.raises(
        GateAlreadyDecided, match=re.escape("is failed (rejected), no longer waiting")
    ):
        workflows.claim_gate(gates["open"], assignee)


def test_the_claimer_releases_and_anyone_may_claim_again(gates, assignee, stranger):
    workflows.claim_gate(gates["open"], assignee)
    gate = workflows.unclaim_gate(gates["open"], assignee, address="::ffff:10.0.0.1")
    assert (gate.claimed_by, gate.claimed_at) == (None, None)
    event = Event.objects.get(type="gate.unclaimed")
    assert event.payload["by"] == "assignee"
    assert event.payload["claimed_by"] == "assignee"
    assert event.payload["address"] == "::ffff:10.0.0.1"
    assert workflows.claim_gate(gates["open"], stranger).claimed_by == stranger
    workflows.unclaim_gate(gates["open"], stranger)
    workflows.unclaim_gate(gates["open"], stranger)  # nothing to release: nothing written
    assert Event.objects.filter(type="gate.unclaimed").count() == 2


def test_releasing_someone_elses_claim_needs_the_override_permission(
    gates, assignee, stranger, overrider
):
    workflows.claim_gate(gates["open"], assignee)
    with pytest.raises(GateClaimed, match="only they, or a user with permission"):
        workflows.unclaim_gate(gates["open"], stranger)
    workflows.unclaim_gate(gates["open"], overrider)
    event = Event.objects.get(type="gate.unclaimed")
    assert (event.payload["by"], event.payload["claimed_by"]) == ("olga", "assignee")


def test_a_third_user_may_not_decide_a_claimed_gate(gates, assignee, stranger):
    workflows.claim_gate(gates["open"], assignee)
    with pytest.raises(GateClaimed, match="claimed by assignee"):
        workflows.approve_gate(gates["open"], user=stranger)
    with pytest.raises(GateClaimed):
        workflows.reject_gate(gates["open"], user=stranger)
    assert Step.objects.get(pk=gates["open"].pk).status == "waiting"
    assert not Event.objects.filter(type="gate.decided").exists()


def test_the_claimer_decides_a_claimed_gate(gates, assignee):
    workflows.claim_gate(gates["user"], assignee)
    gate = workflows.approve_gate(gates["user"], user=assignee)
    assert gate.decided_by == assignee
    assert "overrode_claim_of" not in Event.objects.get(type="gate.decided").payload


def test_an_override_holder_decides_a_claimed_gate_and_it_is_recorded(gates, assignee, overrider):
    workflows.claim_gate(gates["open"], assignee)
    gate = workflows.reject_gate(gates["open"], user=overrider, feedback="taking over")
    assert (gate.decision, gate.decided_by) == ("rejected", overrider)
    payload = Event.objects.get(type="gate.decided").payload
    assert (payload["by"], payload["overrode_claim_of"]) == ("olga", "assignee")


def test_superusers_may_override_claims(gates, assignee):
    workflows.claim_gate(gates["user"], assignee)
    root = User.objects.create_superuser("root")
    assert workflows.approve_gate(gates["user"], user=root).decided_by == root


def test_a_claim_between_a_read_and_a_decision_wins(gates, assignee, stranger):
    read = Step.objects.get(pk=gates["open"].pk)
    workflows.claim_gate(gates["open"], assignee)
    with pytest.raises(GateClaimed):
        decide_gate(read.pk, version=read.version, decision="approved", user=stranger)
    released = workflows.unclaim_gate(gates["open"], assignee)
    with pytest.raises(StaleState, match="changed since it was read"):
        decide_gate(read.pk, version=read.version, decision="approved", user=stranger)
    decide_gate(read.pk, version=released.version, decision="approved", user=stranger)


def test_a_gate_entered_again_starts_unclaimed(gates):
    holder = User.objects.create_user("holder")
    holder.user_permissions.add(Permission.objects.get(codename="change_user"))
    holder = fresh(holder)
    workflows.claim_gate(gates["permission"], holder)
    workflows.reject_gate(gates["permission"], user=holder, address="10.1.1.1")
    assert Step.objects.get(pk=gates["permission"].pk).decided_from == "10.1.1.1"
    workflows.retry_step(gates["permission"])
    run_pending()
    gate = Step.objects.get(pk=gates["permission"].pk)
    assert gate.status == "waiting"
    assert (gate.claimed_by, gate.claimed_at, gate.decided_from) == (None, None, None)


@pytest.mark.parametrize("address", ["10.0.0.300", "localhost", "", 167772161])
def test_a_bad_address_is_refused_and_nothing_is_written(gates, assignee, address):
    for verb in (
        partial(workflows.claim_gate, gates["open"], assignee),
        partial(workflows.unclaim_gate, gates["open"], assignee),
        partial(workflows.approve_gate, gates["open"], user=assignee),
        partial(workflows.reject_gate, gates["open"], user=assignee),
    ):
        with pytest.raises(InvalidInput, match="must be an IPv4 or IPv6 address"):
            verb(address=address)
    gate = Step.objects.get(pk=gates["open"].pk)
    assert (gate.status, gate.claimed_by, gate.version) == ("waiting", None, gates["open"].version)
    assert not Event.objects.filter(type__startswith="gate.").exists()


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_claims_one_wins(concurrently):
    approver = User.objects.create_user("approver")
    colleague = User.objects.create_user("colleague")
    for attempt in range(5):
        gate = waiting(Open, f"R-{attempt}")
        results = concurrently(
            partial(workflows.claim_gate, gate.pk, approver),
            partial(workflows.claim_gate, gate.pk, colleague),
        )
        claimed = [result for result in results if isinstance(result, Step)]
        refused = [result for result in results if isinstance(result, GateClaimed)]
        assert (len(claimed), len(refused)) == (1, 1), results
        gate.refresh_from_db()
        assert gate.claimed_by == claimed[0].claimed_by
        assert Event.objects.filter(step=gate, type="gate.claimed").count() == 1


# -- commands ----------------------------------------------------------------------------


def test_workflows_gates_lists_every_waiting_gate_or_a_users(gates, assignee):
    workflows.claim_gate(gates["open"], assignee)
    listing = run_command("workflows_gates").splitlines()
    assert listing[0].split()[:3] == ["STEP", "GATE", "RUN"]
    assert len(listing) == 5
    assert listing[1].split()[:2] == [str(gates["permission"].pk), "gate"]
    assert "Refund P-1?" in listing[1]
    mine = run_command("workflows_gates", "--user", "assignee").splitlines()
    assert [line.split()[0] for line in mine[1:]] == [str(gates["user"].pk), str(gates["open"].pk)]
    assert mine[2].rstrip().endswith("assignee")
    data = json.loads(run_command("workflows_gates", "--user", "assignee", "--json"))
    assert [gate["step"] for gate in data] == [gates["user"].pk, gates["open"].pk]
    assert data[1]["claimed_by"] == "assignee"
    assert data[1]["due_at"] is not None


def test_workflows_gates_says_when_nothing_waits(stranger):
    assert run_command("workflows_gates").strip() == "no gates waiting"
    assert (
        run_command("workflows_gates", "--user", "stranger").strip()
        == "no gates waiting for stranger"
    )
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        run_command("workflows_gates", "--user", "nobody")


def test_workflows_claim_claims_and_releases(gates, assignee, stranger):
    step = str(gates["open"].pk)
    line = run_command("workflows_claim", step, "--user", "assignee").strip()
    assert line.endswith(": waiting, claimed by assignee")
    with pytest.raises(CommandError, match=re.escape("gate 'gate' is claimed by assignee")):
        run_command("workflows_claim", step, "--user", "stranger")
    with pytest.raises(CommandError, match="claimed by assignee"):
        run_command("workflows_claim", step, "--user", "stranger", "--release")
    data = json.loads(
        run_command("workflows_claim", step, "--user", "assignee", "--release", "--json")
    )
    assert (data["claimed_by"], data["status"]) == (None, "waiting")
    with pytest.raises(CommandError, match="may not decide gate"):
        run_command("workflows_claim", str(gates["user"].pk), "--user", "stranger")


def test_a_decision_at_the_version_the_decider_saw_refuses_a_gate_changed_since():
    """A release between reading the gate and deciding is caught, not decided blind."""
    approver = User.objects.create_superuser("approver-seen", "a@example.com", "pw")
    run = workflows.start_run(Open, {"order": "O-1"})
    gate = Step.objects.get(run=run, name="gate")
    seen = gate.version
    workflows.claim_gate(gate, approver)
    workflows.unclaim_gate(gate, approver)
    with pytest.raises(workflows.StaleVersion, match=f"changed since version {seen}"):
        workflows.approve_gate(gate, user=approver, expected_version=seen)
    gate.refresh_from_db()
    assert gate.status == "waiting"
    decided = workflows.approve_gate(gate, user=approver, expected_version=gate.version)
    assert decided.status == "completed"
