"""``cancel_flow`` racing, with real connections committing for real (one per thread,
:func:`tests.support.threads.run_concurrently`): two cancellations of one flow, and a
cancellation against ``add_to_flow``. On PostgreSQL the transitions interleave; on
SQLite writers take turns. Repeated, a new flow each round, to meet more interleavings.
"""

from __future__ import annotations

from typing import Any

import pytest

import workflows
from tests.support.flows import add
from tests.support.threads import run_concurrently
from workflows.errors import InvalidFlowChange, InvalidTransition
from workflows.models import Event, Flow, Run
from workflows.status import FlowStatus, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 6


def graph(name: str) -> Flow:
    """A running gate and a chain of blocked members after it."""
    flow = workflows.create_flow(name)
    add(flow, "gate")
    add(flow, "b1", after=("gate",))
    add(flow, "b2", after=("b1",))
    add(flow, "b3", after=("b2",))
    add(flow, "b4", after=("b1",))
    return flow


def settled(flow: Flow) -> dict[str, tuple[str, str]]:
    return {
        name: (status, (error or {}).get("code", ""))
        for name, status, error in Run.objects.filter(flow=flow).values_list(
            "flow_member__name", "status", "error"
        )
    }


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_two_cancellations_cancel_each_member_once_and_agree(round_: int):
    flow = graph(f"twice {round_}")
    results = run_concurrently(
        lambda: workflows.cancel_flow(flow, "cancel_pending", reason="first"),
        lambda: workflows.cancel_flow(flow, "cancel_pending", reason="second"),
    )
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    first, second = results
    stored = Flow.objects.get(pk=flow.pk)
    assert stored.members_cancelled_at is not None
    # Both answer with the stored record: the winner's reason, four members, exactly.
    assert first.reason == second.reason == stored.cancel_reason
    assert first.cancelled == second.cancelled == 4
    assert set(first.members) == {"b1", "b2", "b3", "b4"}
    assert settled(flow) == {
        "gate": (RunStatus.RUNNING, ""),
        **{name: (RunStatus.CANCELLED, "flow_cancelled") for name in ("b1", "b2", "b3", "b4")},
    }
    assert Event.objects.filter(flow=flow, type="flow.cancelled").count() == 1
    cancels = Event.objects.filter(type="run.cancel_requested", run__flow=flow).count()
    assert cancels == 4  # no member cancelled twice
    assert not Event.objects.filter(flow=flow, type="flow.dependency_failed").exists()


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_two_cancellations_with_different_policies_one_is_refused(round_: int):
    flow = graph(f"policies {round_}")
    results = run_concurrently(
        lambda: workflows.cancel_flow(flow, "cancel_all"),
        lambda: workflows.cancel_flow(flow, "flow_only"),
    )
    refused = [r for r in results if isinstance(r, InvalidTransition)]
    records = [r for r in results if not isinstance(r, BaseException)]
    assert (len(refused), len(records)) == (1, 1), results
    [record] = records
    stored = Flow.objects.get(pk=flow.pk)
    assert stored.cancel_policy == record.policy
    if record.policy == "cancel_all":
        assert record.cancelled == 5
    else:
        assert record.cancelled == 0


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_cancel_flow_against_add_to_flow(round_: int):
    flow = graph(f"adding {round_}")

    def added() -> Any:
        return add(flow, "late", after=("b2",))

    cancelled, late = run_concurrently(
        lambda: workflows.cancel_flow(flow, "cancel_pending", reason="stop"), added
    )
    assert not isinstance(cancelled, BaseException), cancelled
    assert Flow.objects.get(pk=flow.pk).status == FlowStatus.CANCELLED
    if isinstance(late, BaseException):
        # The flow closed first: the member was refused, and nothing of it exists.
        assert isinstance(late, InvalidFlowChange), late
        assert cancelled.cancelled == 4
        assert not Run.objects.filter(flow=flow, flow_member__name="late").exists()
    else:
        # The member came first: the cancellation covers it too.
        assert cancelled.cancelled == 5
        assert "late" in cancelled.members
    assert all(
        status == RunStatus.CANCELLED and code == "flow_cancelled"
        for name, (status, code) in settled(flow).items()
        if name != "gate"
    )
