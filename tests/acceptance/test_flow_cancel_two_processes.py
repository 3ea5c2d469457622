"""``cancel_flow`` raced by two real OS processes (issue #35, point 2).

The engine tests race it with threads (:mod:`tests.engine.flows.test_flow_cancel_races`); here
two ``manage.py`` processes, each with its own interpreter and connection, call it on
the same sealed flow at the same instant, as two web processes answering two operators
would. The flow is that test's graph (a running gate, a chain of blocked members after
it), sealed. The race is repeated, a new flow each round, to meet more interleavings;
the assertions read the database afterwards, never timings.

- Same policy: one call closes the flow; both return the same stored record; every
  member ends cancelled once, with the stored reason and code ``flow_cancelled``, none
  with ``dependency_failed``.
- Different policies: one wins; the other is refused with ``InvalidTransition`` (a
  clean ``WorkflowError``) and wrote nothing: the flow, its members and its events are
  exactly those of the winner alone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

import workflows
from tests.acceptance.harness import Processes, Side, race
from tests.engine.flows.test_flow_cancel_races import graph
from workflows.models import Event, Flow, Run
from workflows.status import FlowStatus, RunStatus

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

ROUNDS = 5
MEMBERS = {"gate", "b1", "b2", "b3", "b4"}
PENDING = MEMBERS - {"gate"}
# Both sides act as the operator, and must know the graph's workflow, which only
# pytest's process imports otherwise.
ACTING = ("--user", "operator", "--import", "tests.engine.flows.test_flow_cancel_races")


def sealed_graph(name: str) -> Flow:
    """The engine race's graph, sealed: no member or edge can be added meanwhile."""
    flow = graph(name)
    assert workflows.seal_flow(flow) == FlowStatus.SEALED
    return flow


def cancelling(flows: list[Flow], policy: str, reason: str) -> Side:
    """A side cancelling each round's flow with ``policy`` and ``reason``."""
    return Side([("cancel_flow", str(flow.pk), policy) for flow in flows], ("--reason", reason))


def members(flow: Flow) -> dict[str, tuple[str, str, str]]:
    """Each member's status, error code and error message."""
    return {
        name: (status, (error or {}).get("code", ""), (error or {}).get("message", ""))
        for name, status, error in Run.objects.filter(flow=flow).values_list(
            "flow_member__name", "status", "error"
        )
    }


def cancel_requests(flow: Flow) -> Counter[str]:
    """How many times each member was asked to cancel."""
    return Counter(
        Event.objects.filter(type="run.cancel_requested", run__flow=flow).values_list(
            "run__flow_member__name", flat=True
        )
    )


def racing_cancels(
    processes: Processes, tmp_path: Path, name: str, **policies: str
) -> tuple[list[Flow], list[dict[str, dict[str, Any]]]]:
    """A new sealed flow per round, and one process per side cancelling it with its
    policy (the side's name is its reason), released together; the flows and each
    round's outcomes by side."""
    flows = [sealed_graph(f"{name} {round_}") for round_ in range(ROUNDS)]
    sides = {side: cancelling(flows, policy, side) for side, policy in policies.items()}
    return flows, race(processes, tmp_path / "race", sides, *ACTING)


@pytest.fixture
def operator() -> Any:
    return get_user_model().objects.create_user("operator")


def test_two_processes_cancelling_with_one_policy_close_once_and_agree(
    processes: Processes, tmp_path: Path, operator: Any
):
    flows, rounds = racing_cancels(
        processes, tmp_path, "same policy", first="cancel_all", second="cancel_all"
    )
    for flow, outcomes in zip(flows, rounds, strict=True):
        assert ["result" in outcome for outcome in outcomes.values()] == [True] * 2, outcomes
        first, second = (outcome["result"] for outcome in outcomes.values())
        stored = Flow.objects.get(pk=flow.pk)
        assert (stored.status, stored.cancel_policy, stored.cancelled_by) == (
            FlowStatus.CANCELLED,
            "cancel_all",
            operator,
        )
        assert stored.cancel_reason in ("first", "second")
        assert stored.members_cancelled_at is not None
        # Both answer with the one stored record: the winner's reason, every member.
        assert first == second, outcomes
        assert (first["reason"], first["by"], first["complete"]) == (
            stored.cancel_reason,
            "operator",
            True,
        )
        assert (first["cancelled"], set(first["members"])) == (5, MEMBERS)
        assert members(flow) == {
            name: (RunStatus.CANCELLED, "flow_cancelled", stored.cancel_reason) for name in MEMBERS
        }
        assert cancel_requests(flow) == dict.fromkeys(MEMBERS, 1)  # none twice
        assert Event.objects.filter(flow=flow, type="flow.cancelled").count() == 1
        assert not Event.objects.filter(flow=flow, type="flow.dependency_failed").exists()


def test_two_processes_cancelling_with_different_policies_one_wins_one_is_refused(
    processes: Processes, tmp_path: Path, operator: Any
):
    flows, rounds = racing_cancels(
        processes, tmp_path, "two policies", all="cancel_all", pending="cancel_pending"
    )
    for flow, outcomes in zip(flows, rounds, strict=True):
        records = [outcome["result"] for outcome in outcomes.values() if "result" in outcome]
        refusals = [outcome["error"] for outcome in outcomes.values() if "error" in outcome]
        assert (len(records), len(refusals)) == (1, 1), outcomes
        [record], [refusal] = records, refusals
        winner = record["policy"]  # which one is the scheduler's choice
        assert (refusal["class"], refusal["code"], refusal["workflow_error"]) == (
            "InvalidTransition",
            "invalid_transition",
            True,
        ), refusal
        assert f"cancelled with policy {winner}" in refusal["message"]

        # Only the winner's writes: its policy and reason, its members, once each.
        stored = Flow.objects.get(pk=flow.pk)
        assert (stored.status, stored.cancel_policy, stored.cancel_reason) == (
            FlowStatus.CANCELLED,
            winner,
            record["reason"],
        )
        assert stored.members_cancelled_at is not None
        cancelled = MEMBERS if winner == "cancel_all" else PENDING
        assert (record["cancelled"], set(record["members"]), record["complete"]) == (
            len(cancelled),
            cancelled,
            True,
        )
        expected = {
            name: (RunStatus.CANCELLED, "flow_cancelled", record["reason"]) for name in cancelled
        }
        if winner == "cancel_pending":
            expected["gate"] = (RunStatus.RUNNING, "", "")  # cancel_pending leaves it running
        assert members(flow) == expected
        assert cancel_requests(flow) == dict.fromkeys(cancelled, 1)
        assert Event.objects.filter(flow=flow, type="flow.cancelled").count() == 1
        assert not Event.objects.filter(flow=flow, type="flow.dependency_failed").exists()
