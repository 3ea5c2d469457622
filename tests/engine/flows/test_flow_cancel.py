"""``cancel_flow``, issue #35 point 2: the policy, reason and actor are stored in the
transaction that closes the flow; blocked members are cancelled downstream-first (each
ends ``cancelled`` with the flow's reason, code ``flow_cancelled``, none with
``dependency_failed``, and the count is exact); a repeated call returns the stored
record; the ``finish_flow_cancellations`` scanner finishes what a dead process left."""

from __future__ import annotations

from unittest import mock

import pytest
from django.contrib.auth import get_user_model

import workflows
from tests.support.flows import add, statuses
from workflows.engine import claim_step, complete_work
from workflows.engine.flows import cancellation
from workflows.errors import InvalidTransition
from workflows.models import Event, Flow, Run, Step
from workflows.status import FlowStatus, RunStatus, StepStatus
from workflows.testing import run_pending
from workflows.workers.scanners import RECOVERY_SCANNERS, finish_flow_cancellations

pytestmark = pytest.mark.django_db


def codes(flow: Flow) -> dict[str, str]:
    return {
        name: (error or {}).get("code", "")
        for name, error in Run.objects.filter(flow=flow).values_list("flow_member__name", "error")
    }


def chain_added_downstream_first(flow: Flow) -> None:
    """``first`` is added before its upstream ``second`` (an edge added later): newest
    first would cancel ``second`` first and end ``first`` dependency_failed."""
    add(flow, "gate")  # running: keeps the others blocked
    add(flow, "first", after=("gate",))
    add(flow, "second", after=("gate",))
    add(flow, "third", after=("first",))
    workflows.add_dependency(flow, "second", "first")


def test_blocked_members_are_cancelled_downstream_first_with_the_flows_reason():
    flow = workflows.create_flow("ordered")
    chain_added_downstream_first(flow)
    record = workflows.cancel_flow(flow, "cancel_pending", reason="batch moved")
    assert record.cancelled == 3
    assert set(record.members) == {"first", "second", "third"}
    assert statuses(flow) == {
        "gate": RunStatus.RUNNING,
        "first": RunStatus.CANCELLED,
        "second": RunStatus.CANCELLED,
        "third": RunStatus.CANCELLED,
    }
    assert codes(flow) == {
        "gate": "",
        "first": "flow_cancelled",
        "second": "flow_cancelled",
        "third": "flow_cancelled",
    }
    messages = set(
        Run.objects.filter(flow=flow, status=RunStatus.CANCELLED).values_list(
            "error__message", flat=True
        )
    )
    assert messages == {"batch moved"}
    assert not Event.objects.filter(flow=flow, type="flow.dependency_failed").exists()
    # The cancelled run's events come downstream-first: third, first, second.
    order = list(
        Event.objects.filter(type="run.cancel_requested", run__flow=flow)
        .order_by("id")
        .values_list("run__flow_member__name", flat=True)
    )
    assert order == ["third", "first", "second"]


def test_the_policy_reason_and_actor_are_stored_with_the_flow():
    operator = get_user_model().objects.create_user("flow-operator")
    flow = workflows.create_flow("stored")
    add(flow, "a")
    add(flow, "b", after=("a",))
    record = workflows.cancel_flow(flow, "cancel_all", reason="customer withdrew", user=operator)
    stored = Flow.objects.get(pk=flow.pk)
    assert (stored.status, stored.cancel_policy, stored.cancel_reason) == (
        FlowStatus.CANCELLED,
        "cancel_all",
        "customer withdrew",
    )
    assert stored.cancelled_by == operator
    assert stored.members_cancelled_at is not None
    assert (record.policy, record.reason, record.by, record.complete) == (
        "cancel_all",
        "customer withdrew",
        "flow-operator",
        True,
    )
    assert (record.cancelled, record.members) == (2, ("a", "b"))
    # Every member's cancellation names the actor.
    by = set(
        Event.objects.filter(type="run.cancel_requested", run__flow=flow).values_list(
            "payload__by", flat=True
        )
    )
    assert by == {"flow-operator"}


def test_a_repeat_returns_the_stored_record_and_another_policy_is_refused():
    flow = workflows.create_flow("repeat")
    add(flow, "a")
    add(flow, "b", after=("a",))
    first = workflows.cancel_flow(flow, "cancel_pending", reason="one")
    again = workflows.cancel_flow(flow, "cancel_pending", reason="two")
    assert again == first
    assert (again.reason, again.cancelled, again.members) == ("one", 1, ("b",))
    with pytest.raises(InvalidTransition, match="cancelled with policy cancel_pending"):
        workflows.cancel_flow(flow, "flow_only")
    assert Event.objects.filter(flow=flow, type="flow.cancelled").count() == 1


def test_flow_only_is_complete_at_once_and_cancels_nobody():
    flow = workflows.create_flow("only")
    add(flow, "a")
    add(flow, "b", after=("a",))
    record = workflows.cancel_flow(flow, "flow_only")
    assert (record.cancelled, record.members, record.complete) == (0, (), True)
    run_pending()
    assert statuses(flow) == {"a": RunStatus.COMPLETED, "b": RunStatus.COMPLETED}


def interrupted(flow: Flow, policy: str, reason: str = "interrupted") -> None:
    """``cancel_flow`` as a process dying between the flow's close and its members'
    cancellation leaves it."""
    with (
        mock.patch.object(cancellation, "cancel_members", side_effect=KeyboardInterrupt),
        pytest.raises(KeyboardInterrupt),
    ):
        workflows.cancel_flow(flow, policy, reason=reason)


def test_the_scanner_finishes_a_cancellation_a_dead_process_left():
    flow = workflows.create_flow("interrupted")
    chain_added_downstream_first(flow)
    interrupted(flow, "cancel_all")
    stored = Flow.objects.get(pk=flow.pk)
    assert (stored.status, stored.members_cancelled_at) == (FlowStatus.CANCELLED, None)
    assert set(statuses(flow).values()) == {RunStatus.RUNNING, RunStatus.BLOCKED}
    assert cancellation.cancellations_to_finish(10) == [flow.pk]
    assert "finish_flow_cancellations" in RECOVERY_SCANNERS  # the sweeper runs it

    result = finish_flow_cancellations()
    assert (result.found, result.done, result.errors) == (1, 1, 0)
    run_pending()
    assert set(statuses(flow).values()) == {RunStatus.CANCELLED}
    assert set(codes(flow).values()) == {"flow_cancelled"}
    assert cancellation.cancellations_to_finish(10) == []
    record = cancellation.cancellation_of(flow.pk)
    assert (record.cancelled, record.complete, record.reason) == (4, True, "interrupted")
    assert finish_flow_cancellations().found == 0


def test_a_blocked_member_does_not_start_before_an_interrupted_cancellation_ends():
    flow = workflows.create_flow("held back")
    gate = add(flow, "gate")
    add(flow, "after", after=("gate",))
    interrupted(flow, "cancel_pending")
    # The gate completes: the member's join is satisfied, but its flow's policy will
    # cancel it, so it stays blocked until the scanner does.
    step = Step.objects.get(run=gate, status=StepStatus.READY)
    complete_work(claim_step(step.pk, "test"), "done")
    assert statuses(flow) == {"gate": RunStatus.COMPLETED, "after": RunStatus.BLOCKED}
    finish_flow_cancellations()
    assert statuses(flow) == {"gate": RunStatus.COMPLETED, "after": RunStatus.CANCELLED}
    assert codes(flow)["after"] == "flow_cancelled"


def test_a_repeated_call_finishes_an_interrupted_cancellation():
    flow = workflows.create_flow("repeated")
    add(flow, "a")
    add(flow, "b", after=("a",))
    interrupted(flow, "cancel_pending", reason="first")
    record = workflows.cancel_flow(flow, "cancel_pending", reason="second")
    assert (record.cancelled, record.members, record.reason, record.complete) == (
        1,
        ("b",),
        "first",
        True,
    )
