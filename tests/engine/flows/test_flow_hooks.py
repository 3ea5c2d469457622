"""The hooks of a flow: each ``flow.*`` event fires its signal once, after commit, with
the flow's name as sender and ``flow_id``; an event of the whole flow has no run."""

from __future__ import annotations

from typing import Any

import pytest

import workflows
from tests.support.hooks import received_fixture
from tests.support.workflows import Broken, Waits, Work
from workflows import hooks
from workflows.models import Event, Flow, Run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


# Every flow hook (and ``run_finished``) sent while the test runs, with its arguments.
received = received_fixture(
    "flow_created",
    "flow_member_added",
    "flow_edge_added",
    "flow_join_changed",
    "flow_member_unblocked",
    "flow_dependency_failed",
    "flow_member_healed",
    "flow_reopened",
    "flow_sealed",
    "flow_finished",
    "run_finished",
)


def flow_hooks(calls: list[dict[str, Any]], flow: Flow) -> list[tuple[str, str | None]]:
    """(hook, member) of each flow hook of ``flow``, in order; member None for the flow's."""
    members = dict(Run.objects.filter(flow=flow).values_list("pk", "flow_member__name"))
    return [
        (call["hook"], members.get(call["run_id"]))
        for call in calls
        if call.get("flow_id") == flow.pk
    ]


def test_a_flow_fires_a_hook_for_each_change_to_its_graph_and_for_its_end(received):
    flow = workflows.create_flow("nightly", key="nightly-1")
    workflows.add_to_flow(flow, Work, {}, member="extract")
    workflows.add_to_flow(flow, Work, {}, member="load", after=["extract"])
    workflows.add_to_flow(flow, Work, {}, member="report", after=["load"])
    workflows.add_dependency(flow, "extract", "report")
    workflows.seal_flow(flow)
    run_pending()
    assert flow_hooks(received, flow) == [
        ("flow_created", None),
        ("flow_member_added", "extract"),  # nothing holds it: it starts at once, unblocked by none
        ("flow_member_added", "load"),
        ("flow_edge_added", "load"),
        ("flow_member_added", "report"),
        ("flow_edge_added", "report"),
        ("flow_edge_added", "report"),
        ("flow_sealed", None),
        ("flow_member_unblocked", "load"),
        ("flow_member_unblocked", "report"),
        ("flow_finished", None),
    ]
    flow_calls = [call for call in received if "flow_id" in call]
    assert {call["sender"] for call in flow_calls} == {"nightly"}
    assert {call["step_id"] for call in flow_calls} == {None}
    created, finished = flow_calls[0], flow_calls[-1]
    assert created["event"].payload == {"flow": "nightly", "key": "nightly-1", "by": None}
    assert (finished["status"], finished["event"].type) == ("completed", "flow.completed")
    assert finished["event"].payload["not_completed"] == {}
    staged = flow_calls[6]["event"].payload
    assert (staged["upstream"], staged["downstream"]) == ("extract", "report")
    # The members' own hooks keep their workflow as sender and carry no flow_id.
    ends = [call for call in received if call["hook"] == "run_finished"]
    assert [(call["sender"], "flow_id" in call) for call in ends] == [(Work.name, False)] * 3
    assert not Event.objects.filter(published=False).exists()


def test_a_failed_upstream_fires_dependency_failed_and_the_flow_fails(received):
    flow = workflows.create_flow("breaks")
    workflows.add_to_flow(flow, Broken, {}, member="extract")
    workflows.add_to_flow(flow, Work, {}, member="load", after=["extract"])
    workflows.seal_flow(flow)
    run_pending()
    fired = flow_hooks(received, flow)
    assert fired[-2:] == [("flow_dependency_failed", "load"), ("flow_finished", None)]
    failed = next(call for call in received if call["hook"] == "flow_dependency_failed")
    assert failed["event"].payload | {"member": "load"} == {
        "member": "load",
        "upstream": "extract",
        "upstream_status": "failed",
    }
    finished = received[-1]
    assert (finished["hook"], finished["status"], finished["run_id"]) == (
        "flow_finished",
        "failed",
        None,
    )
    assert finished["event"].payload["not_completed"] == {"extract": "failed", "load": "cancelled"}


def test_retrying_the_failed_upstream_fires_reopened_and_member_healed(received):
    flow = workflows.create_flow("heals")
    extract = workflows.add_to_flow(flow, Broken, {}, member="extract")
    workflows.add_to_flow(flow, Work, {}, member="load", after=["extract"])
    workflows.seal_flow(flow)
    run_pending()
    received.clear()
    workflows.retry_run(extract.pk)
    run_pending()  # delivers the hooks (extract fails again: the flow fails again)
    fired = flow_hooks(received, flow)
    assert fired[:2] == [("flow_reopened", None), ("flow_member_healed", "load")]
    reopened = next(call for call in received if call["hook"] == "flow_reopened")
    assert reopened["event"].payload["member"] == "extract"
    assert reopened["event"].payload["reopened"] == 1
    healed = next(call for call in received if call["hook"] == "flow_member_healed")
    assert healed["event"].payload["healed_by"] == "extract"
    assert fired[-1] == ("flow_finished", None)


def test_a_join_change_and_a_cancelled_flow_fire_their_hooks(received):
    flow = workflows.create_flow("cancelled")
    workflows.add_to_flow(flow, Waits, {}, member="first")
    workflows.add_to_flow(flow, Waits, {}, member="second")
    workflows.add_to_flow(flow, Work, {}, member="last", after=["first", "second"])
    workflows.set_join(flow, "last", "any")
    workflows.cancel_flow(flow, "cancel_pending", reason="not needed")
    run_pending()
    fired = flow_hooks(received, flow)
    assert ("flow_join_changed", "last") in fired
    assert fired[-1] == ("flow_finished", None)
    finished = received[
        max(i for i, call in enumerate(received) if call["hook"] == "flow_finished")
    ]
    assert finished["status"] == "cancelled"
    assert finished["event"].payload["policy"] == "cancel_pending"
    joined = next(call for call in received if call["hook"] == "flow_join_changed")
    assert joined["event"].payload["join"] == "any"


def test_a_receiver_raising_on_a_flows_hook_is_logged_naming_the_flow(received, caplog):
    def explode(**arguments: Any) -> None:
        raise ValueError("receiver bug")

    hooks.flow_sealed.connect(explode)
    try:
        flow = workflows.create_flow("sealed")
        workflows.seal_flow(flow)
        run_pending()
    finally:
        hooks.flow_sealed.disconnect(explode)
    assert f"(flow.sealed of flow {flow.pk}); not retried" in caplog.text
    # The other receivers still got the flow's hooks, its end included.
    assert flow_hooks(received, flow) == [
        ("flow_created", None),
        ("flow_sealed", None),
        ("flow_finished", None),
    ]
