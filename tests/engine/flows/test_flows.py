"""Flows, the contract of issue #22 verb by verb: members, edges with a revision check,
joins, failure propagation, sealing, cancelling, the history, settling many downstream
members in batches, and the ``repair_flows`` backstop.

Members here are runs of one-step workflows. A test that wants to order the ends of its
members claims and completes (or fails) each member's step itself (:func:`finish`);
``run_pending`` runs everything that is ready, and runs the ``repair_flows`` scanner,
which ends sealed flows in these tests: they run in a transaction that never commits,
so the after-commit end of a flow does not run unless a test asks for it.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Count

import workflows
from tests.support.flows import finish, flow_status, status, statuses
from tests.support.handlers import UNDO, UNDONE
from tests.support.workflows import ECHO, Echo
from workflows import PermanentError, Retry, Task, Workflow
from workflows.engine.flows import settle
from workflows.engine.flows.joins import JoinRule, Verdict
from workflows.errors import (
    IdempotencyConflict,
    InvalidFlowChange,
    InvalidInput,
    InvalidTransition,
    StaleRevision,
)
from workflows.models import Event, Flow, FlowEdge, FlowMember, Run, Step
from workflows.status import FlowStatus, RunStatus, StepStatus
from workflows.testing import run_pending
from workflows.workers.scanners import repair_flows

pytestmark = pytest.mark.django_db

HERE = "tests.engine.flows.test_flows"
ONCE = Retry(max_attempts=1)


def broken(ctx: Any) -> None:
    raise PermanentError("broken on purpose")


def read_upstream(ctx: Any) -> dict[str, Any]:
    """What a downstream handler sees of its upstream members."""
    return {
        name: {"output": ctx.upstream[name].output, "status": ctx.upstream[name].status}
        for name in ctx.upstream
    }


class Other(Workflow):
    name = "flows_other"
    answer = Task(ECHO, retry=ONCE)


class Broken(Workflow):
    name = "flows_broken"
    answer = Task(f"{HERE}.broken", retry=ONCE)


class Reader(Workflow):
    name = "flows_reader"
    read = Task(f"{HERE}.read_upstream", retry=ONCE)


class Limited(Workflow):
    name = "flows_limited"
    max_concurrent_runs = 1
    answer = Task(ECHO, retry=ONCE)


class Booking(Workflow):
    """Books (compensated by ``undo``), then pays: cancelled between the two, the booking
    is undone."""

    name = "flows_booking"
    book = Task(ECHO, compensate=UNDO, retry=ONCE)
    pay = Task(ECHO, retry=ONCE)


# -- helpers ---------------------------------------------------------------------------


def dependency_failed(run: Run) -> dict[str, Any]:
    """The member's error, once checked that it was cancelled because an upstream failed."""
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.CANCELLED
    assert fresh.error["code"] == "dependency_failed"
    return fresh.error


def started_events(run: Run) -> int:
    return Event.objects.filter(run=run, type="run.started").count()


def revision(flow: Flow) -> int:
    return Flow.objects.values_list("revision", flat=True).get(pk=flow.pk)


@pytest.fixture
def flow() -> Flow:
    return workflows.create_flow("build")


# -- create_flow ------------------------------------------------------------------------


def test_create_flow_is_idempotent_on_its_key():
    first = workflows.create_flow("nightly", key="nightly-2026-01-01")
    again = workflows.create_flow("nightly", key="nightly-2026-01-01")
    assert again.pk == first.pk
    assert (first.status, first.revision) == (FlowStatus.OPEN, 0)
    assert workflows.create_flow("nightly").pk != first.pk  # no key: a new flow each time
    assert Event.objects.filter(flow=first, type="flow.created").count() == 1


def test_a_flow_key_used_for_another_name_is_a_conflict():
    flow = workflows.create_flow("nightly", key="k1")
    with pytest.raises(IdempotencyConflict) as raised:
        workflows.create_flow("weekly", key="k1")
    assert raised.value.details["flow"] == str(flow.pk)
    assert Flow.objects.count() == 1


@pytest.mark.parametrize("name", ["", "   ", "bad\x00name", None])
def test_a_flow_name_must_be_text_without_nul(name):
    with pytest.raises(InvalidInput):
        workflows.create_flow(name)
    assert not Flow.objects.exists()


# -- add_to_flow ------------------------------------------------------------------------


def test_a_member_without_upstream_starts_at_once(flow):
    run = workflows.add_to_flow(flow, Echo, {"value": 1}, member="a")
    assert status(run) == RunStatus.RUNNING
    assert Step.objects.get(run=run).status == StepStatus.READY
    assert started_events(run) == 1
    member = FlowMember.objects.get(run=run)
    assert (member.flow_id, member.name, member.join) == (flow.pk, "a", "all")
    assert revision(flow) == 1


def test_a_member_with_an_unfinished_upstream_is_blocked_until_it_completes(flow):
    a = workflows.add_to_flow(flow, Echo, {"value": 1}, member="a")
    b = workflows.add_to_flow(flow, Echo, {"value": 2}, member="b", after=["a"])
    assert status(b) == RunStatus.BLOCKED
    assert Step.objects.get(run=b).status == StepStatus.PENDING
    assert started_events(b) == 0
    assert FlowEdge.objects.filter(upstream__name="a", downstream__name="b").count() == 1
    finish(a)
    assert status(b) == RunStatus.RUNNING
    assert started_events(b) == 1
    run_pending()
    assert status(b) == RunStatus.COMPLETED


def test_a_member_after_a_completed_upstream_starts_at_once(flow):
    workflows.add_to_flow(flow, Echo, {}, member="a")
    run_pending()
    b = workflows.add_to_flow(flow, Echo, {}, member="b", after=["a"])
    assert status(b) == RunStatus.RUNNING


def test_adding_a_member_again_returns_its_run(flow):
    run = workflows.add_to_flow(flow, Echo, {"value": 1}, member="a")
    again = workflows.add_to_flow(flow, Echo, {"value": 1}, member="a")
    assert again.pk == run.pk
    assert revision(flow) == 1
    assert Run.objects.filter(flow=flow).count() == 1


@pytest.mark.parametrize(
    "workflow, data", [(Other, {"value": 1}), (Echo, {"value": 2})], ids=["workflow", "input"]
)
def test_a_member_added_again_as_another_run_is_a_conflict(flow, workflow, data):
    run = workflows.add_to_flow(flow, Echo, {"value": 1}, member="a")
    with pytest.raises(IdempotencyConflict) as raised:
        workflows.add_to_flow(flow, workflow, data, member="a")
    assert raised.value.details == {"flow": str(flow.pk), "member": "a", "run": str(run.pk)}
    assert Run.objects.filter(flow=flow).count() == 1


def test_an_unknown_upstream_is_refused_and_nothing_is_written(flow):
    workflows.add_to_flow(flow, Echo, {}, member="a")
    with pytest.raises(InvalidFlowChange, match="no member 'ghost'"):
        workflows.add_to_flow(flow, Echo, {}, member="b", after=["a", "ghost"])
    assert list(FlowMember.objects.filter(flow=flow).values_list("name", flat=True)) == ["a"]
    assert Run.objects.filter(flow=flow).count() == 1
    assert revision(flow) == 1


@pytest.mark.parametrize("close", ["seal", "cancel"])
def test_a_closed_flow_takes_no_members(flow, close):
    workflows.add_to_flow(flow, Echo, {}, member="a")
    if close == "seal":
        workflows.seal_flow(flow)
    else:
        workflows.cancel_flow(flow, "flow_only")
    with pytest.raises(InvalidFlowChange, match="takes no new members"):
        workflows.add_to_flow(flow, Echo, {}, member="b")
    assert Run.objects.filter(flow=flow).count() == 1


@pytest.mark.parametrize(
    "member, after",
    [
        ("", ()),
        ("  ", ()),
        ("nul\x00", ()),
        (None, ()),
        ("b", ("",)),
        ("b", ("a\x00",)),
        ("b", "a"),  # a string, not a list of names
        ("b", ({"name": "a"},)),
    ],
)
def test_bad_member_names_are_refused(flow, member, after):
    workflows.add_to_flow(flow, Echo, {}, member="a")
    with pytest.raises(InvalidInput):
        workflows.add_to_flow(flow, Echo, {}, member=member, after=after)
    assert Run.objects.filter(flow=flow).count() == 1


def test_a_member_after_itself_is_refused(flow):
    with pytest.raises(InvalidFlowChange, match="'a' cannot depend on itself"):
        workflows.add_to_flow(flow, Echo, {}, member="a", after=["a"])
    assert not Run.objects.filter(flow=flow).exists()


def test_an_unknown_flow_is_refused():
    with pytest.raises(workflows.FlowNotFound):
        workflows.add_to_flow("not-a-flow", Echo, {}, member="a")
    with pytest.raises(workflows.FlowNotFound):
        workflows.add_dependency("00000000-0000-0000-0000-000000000000", "a", "b")


# -- add_dependency ---------------------------------------------------------------------


def three(flow: Flow) -> tuple[Run, Run, Run]:
    """``a`` running; ``b`` and ``c`` blocked after ``a``."""
    a = workflows.add_to_flow(flow, Echo, {}, member="a")
    b = workflows.add_to_flow(flow, Echo, {}, member="b", after=["a"])
    c = workflows.add_to_flow(flow, Echo, {}, member="c", after=["a"])
    return a, b, c


def test_an_edge_returns_the_new_revision(flow):
    three(flow)
    assert revision(flow) == 3
    assert workflows.add_dependency(flow, "b", "c") == 4
    assert workflows.add_dependency(flow, "b", "c", expected_revision=4) == 4  # no-op
    edge = FlowEdge.objects.get(upstream__name="b", downstream__name="c")
    assert edge.revision == 4
    assert FlowEdge.objects.filter(flow=flow).count() == 3
    assert revision(flow) == 4


def test_a_stale_revision_is_refused_with_the_current_one(flow):
    three(flow)
    with pytest.raises(StaleRevision) as raised:
        workflows.add_dependency(flow, "b", "c", expected_revision=2)
    assert raised.value.details["revision"] == 3
    assert raised.value.details["expected_revision"] == 2
    assert raised.value.code == "stale_revision"
    assert not FlowEdge.objects.filter(upstream__name="b", downstream__name="c").exists()
    assert workflows.add_dependency(flow, "b", "c", expected_revision=3) == 4


@pytest.mark.parametrize(
    "upstream, downstream, words",
    [
        ("ghost", "b", "no member 'ghost'"),
        ("b", "ghost", "no member 'ghost'"),
        ("b", "b", "cannot depend on itself"),
        ("a", "a", "cannot depend on itself"),  # started, but the self edge is the mistake
        ("ghost", "ghost", "cannot depend on itself"),
    ],
)
def test_edges_between_unknown_or_same_members_are_refused(flow, upstream, downstream, words):
    three(flow)
    with pytest.raises(InvalidFlowChange, match=words):
        workflows.add_dependency(flow, upstream, downstream)
    assert revision(flow) == 3


def test_an_edge_closing_a_cycle_is_refused(flow):
    three(flow)
    workflows.add_dependency(flow, "b", "c")
    with pytest.raises(InvalidFlowChange, match="would close a cycle"):
        workflows.add_dependency(flow, "c", "b")
    assert revision(flow) == 4


def test_an_edge_closing_a_longer_cycle_is_refused(flow):
    workflows.add_to_flow(flow, Echo, {}, member="root")
    for name in "bcde":
        workflows.add_to_flow(flow, Echo, {}, member=name, after=["root"])
    workflows.add_dependency(flow, "b", "c")
    workflows.add_dependency(flow, "c", "d")
    workflows.add_dependency(flow, "d", "e")
    with pytest.raises(InvalidFlowChange, match="would close a cycle") as raised:
        workflows.add_dependency(flow, "e", "b")
    assert raised.value.details == {"upstream": "e", "downstream": "b"}
    workflows.add_dependency(flow, "b", "e")  # a shortcut along the order is no cycle


def test_an_edge_to_a_started_member_is_refused(flow):
    three(flow)
    workflows.add_to_flow(flow, Echo, {}, member="solo")
    with pytest.raises(InvalidFlowChange, match="'solo' has started") as raised:
        workflows.add_dependency(flow, "b", "solo")
    assert raised.value.details == {"member": "solo", "status": RunStatus.RUNNING}
    assert revision(flow) == 4
    finish(Run.objects.get(flow_member__name="solo"))
    with pytest.raises(InvalidFlowChange, match="'solo' has started"):
        workflows.add_dependency(flow, "b", "solo")


@pytest.mark.parametrize("close", ["seal", "cancel"])
def test_a_closed_flow_takes_no_edges(flow, close):
    three(flow)
    if close == "seal":
        workflows.seal_flow(flow)
    else:
        workflows.cancel_flow(flow, "flow_only")
    with pytest.raises(InvalidFlowChange, match="takes no new edges"):
        workflows.add_dependency(flow, "b", "c")
    assert not FlowEdge.objects.filter(upstream__name="b").exists()


def test_an_edge_from_a_completed_upstream_counts_at_once(flow):
    a, b, _ = three(flow)
    workflows.add_to_flow(flow, Echo, {}, member="done")
    done = Run.objects.get(flow_member__name="done")
    finish(done)
    workflows.set_join(flow, "b", "any")
    workflows.add_dependency(flow, "done", "b")
    assert status(b) == RunStatus.RUNNING
    assert status(a) == RunStatus.RUNNING


def test_bad_edge_names_are_refused(flow):
    three(flow)
    for upstream, downstream in (("", "b"), ("a", "b\x00"), (None, "b")):
        with pytest.raises(InvalidInput):
            workflows.add_dependency(flow, upstream, downstream)


# -- set_join ---------------------------------------------------------------------------


def test_set_join_changes_a_blocked_members_join(flow):
    three(flow)
    assert workflows.set_join(flow, "c", "any") == 4
    assert workflows.set_join(flow, "c", 1) == 5
    member = FlowMember.objects.get(flow=flow, name="c")
    assert (member.join, member.join_count) == ("at_least", 1)
    assert workflows.set_join(flow, "c", "all") == 6
    member.refresh_from_db()
    assert (member.join, member.join_count) == ("all", None)
    changes = Event.objects.filter(flow=flow, type="flow.join_changed")
    assert [event.payload["join"] for event in changes] == ["any", 1, "all"]


def test_set_join_is_refused_once_the_member_has_started(flow):
    three(flow)
    with pytest.raises(InvalidFlowChange, match="'a' has started"):
        workflows.set_join(flow, "a", "any")


@pytest.mark.parametrize("join", [0, -1, "most", "", True, 1.5, None, ["all"]])
def test_an_invalid_join_is_refused(flow, join):
    three(flow)
    with pytest.raises(InvalidInput) as raised:
        workflows.set_join(flow, "b", join)
    assert raised.value.details == {"field": "join"}
    with pytest.raises(InvalidInput):
        workflows.add_to_flow(flow, Echo, {}, member="d", after=["a"], join=join)
    assert revision(flow) == 3


def test_set_join_on_an_unknown_member_or_closed_flow_is_refused(flow):
    three(flow)
    with pytest.raises(InvalidFlowChange, match="no member 'ghost'"):
        workflows.set_join(flow, "ghost", "any")
    workflows.seal_flow(flow)
    with pytest.raises(InvalidFlowChange, match="takes no join changes"):
        workflows.set_join(flow, "b", "any")


# -- join semantics ---------------------------------------------------------------------


def fan_in(flow: Flow, join: Any, upstreams: int = 3, failed: int = 0) -> tuple[list[Run], Run]:
    """Members ``u0``, ``u1``, ... and ``down`` after them all with ``join``; the first
    ``failed`` upstreams have failed."""
    ups = [workflows.add_to_flow(flow, Echo, {}, member=f"u{i}") for i in range(upstreams)]
    down = workflows.add_to_flow(
        flow, Echo, {}, member="down", after=[f"u{i}" for i in range(upstreams)], join=join
    )
    for up in ups[:failed]:
        finish(up, fail=True)
    return ups, down


def test_an_all_join_starts_after_every_upstream_completed(flow):
    ups, down = fan_in(flow, "all")
    for up in ups[:-1]:
        finish(up)
        assert status(down) == RunStatus.BLOCKED
    finish(ups[-1])
    assert status(down) == RunStatus.RUNNING
    assert started_events(down) == 1


def test_an_any_join_starts_at_the_first_completion(flow):
    ups, down = fan_in(flow, "any")
    finish(ups[1])
    assert status(down) == RunStatus.RUNNING
    finish(ups[0])
    finish(ups[2])
    assert started_events(down) == 1


def test_a_k_join_fires_at_the_kth_completion(flow):
    ups, down = fan_in(flow, 2, upstreams=4)
    finish(ups[3])
    assert status(down) == RunStatus.BLOCKED
    finish(ups[0], fail=True)  # one failed of four: two may still complete
    assert status(down) == RunStatus.BLOCKED
    finish(ups[1])
    assert status(down) == RunStatus.RUNNING
    finish(ups[2])
    assert started_events(down) == 1
    unblocked = Event.objects.get(run=down, type="flow.member_unblocked")
    assert unblocked.payload == {"member": "down", "join": 2}
    assert unblocked.flow_id == flow.pk


def test_only_a_member_that_was_blocked_is_recorded_as_unblocked(flow):
    up = workflows.add_to_flow(flow, Echo, {}, member="up")
    waiting = workflows.add_to_flow(flow, Echo, {}, member="waiting", after=["up"])
    assert status(waiting) == RunStatus.BLOCKED
    finish(up)  # its upstream completes normally: the blocked member starts
    assert status(waiting) == RunStatus.RUNNING
    late = workflows.add_to_flow(flow, Echo, {}, member="late", after=["up"])
    assert status(late) == RunStatus.RUNNING  # its upstream had completed: never blocked
    unblocked = Event.objects.filter(flow=flow, type="flow.member_unblocked")
    assert list(unblocked.values_list("payload__member", flat=True)) == ["waiting"]


def test_an_all_join_that_can_no_longer_be_met_cancels_the_member(flow):
    ups, down = fan_in(flow, "all")
    finish(ups[0])
    finish(ups[1], fail=True)
    error = dependency_failed(down)
    assert error["upstream"] == "u1"
    assert error["upstream_status"] == RunStatus.FAILED
    assert "'u1' ended failed" in error["message"]
    assert started_events(down) == 0
    assert not Step.objects.filter(run=down).exclude(status=StepStatus.CANCELLED).exists()
    failed = Event.objects.get(flow=flow, type="flow.dependency_failed")
    assert (failed.run_id, failed.payload["upstream"]) == (down.pk, "u1")


def test_dependency_failed_propagates_downstream(flow):
    a = workflows.add_to_flow(flow, Broken, {}, member="a")
    workflows.add_to_flow(flow, Echo, {}, member="b", after=["a"])
    workflows.add_to_flow(flow, Echo, {}, member="c", after=["b"])
    workflows.add_to_flow(flow, Echo, {}, member="d", after=["c"], join="any")
    workflows.add_to_flow(flow, Echo, {}, member="side")
    run_pending()
    assert status(a) == RunStatus.FAILED
    # An any join waits while the flow is open (another upstream may come), as k joins do.
    assert status(Run.objects.get(flow=flow, flow_member__name="d")) == RunStatus.BLOCKED
    workflows.seal_flow(flow)
    run_pending()
    assert statuses(flow) == {
        "a": RunStatus.FAILED,
        "b": RunStatus.CANCELLED,
        "c": RunStatus.CANCELLED,
        "d": RunStatus.CANCELLED,
        "side": RunStatus.COMPLETED,
    }
    errors = dict(
        Run.objects.filter(flow=flow, status="cancelled").values_list("flow_member__name", "error")
    )
    assert {name: error["upstream"] for name, error in errors.items()} == {
        "b": "a",
        "c": "b",
        "d": "c",
    }
    assert errors["c"]["upstream_status"] == RunStatus.CANCELLED


def test_an_any_join_with_another_upstream_pending_waits(flow):
    ups, down = fan_in(flow, "any", upstreams=2)
    finish(ups[0], fail=True)
    assert status(down) == RunStatus.BLOCKED
    finish(ups[1])
    assert status(down) == RunStatus.RUNNING


def test_an_any_join_whose_upstreams_all_failed_waits_until_the_flow_is_sealed(flow):
    ups, down = fan_in(flow, "any", upstreams=2)
    finish(ups[0], fail=True)
    workflows.cancel_run(ups[1].pk)
    run_pending()  # the cancellation's compensations, then its end
    assert status(down) == RunStatus.BLOCKED  # open: another upstream may come
    workflows.seal_flow(flow)
    dependency_failed(down)


def test_a_k_join_out_of_reach_waits_while_the_flow_is_open(flow):
    """An open flow may still give the member more upstreams: only sealing settles it."""
    _, down = fan_in(flow, 2, failed=2)
    assert status(down) == RunStatus.BLOCKED
    workflows.seal_flow(flow)
    dependency_failed(down)


def test_a_k_join_can_be_met_by_an_edge_added_later(flow):
    ups, down = fan_in(flow, 2, failed=2)
    finish(ups[2])
    workflows.add_to_flow(flow, Echo, {}, member="late")
    finish(Run.objects.get(flow_member__name="late"))
    workflows.add_dependency(flow, "late", "down")
    assert status(down) == RunStatus.RUNNING


def test_a_downstream_handler_reads_its_upstreams(flow):
    workflows.add_to_flow(flow, Echo, {"value": {"artifact": "app.whl"}}, member="build")
    workflows.add_to_flow(flow, Echo, {"value": 7}, member="lint")
    reader = workflows.add_to_flow(flow, Reader, {}, member="publish", after=["build", "lint"])
    run_pending()
    assert Run.objects.get(pk=reader.pk).output == {
        "read": {
            "build": {"output": {"answer": {"artifact": "app.whl"}}, "status": "completed"},
            "lint": {"output": {"answer": 7}, "status": "completed"},
        }
    }


def test_a_run_outside_a_flow_has_no_upstream():
    run = workflows.start_run(Reader, {})
    run_pending()
    assert Run.objects.get(pk=run.pk).output == {"read": {}}


# -- seal_flow --------------------------------------------------------------------------


def test_a_sealed_flow_completes_when_every_member_completed(flow):
    three(flow)
    assert workflows.seal_flow(flow) == FlowStatus.SEALED
    assert flow_status(flow) == FlowStatus.SEALED
    run_pending()
    ended = Flow.objects.get(pk=flow.pk)
    assert ended.status == FlowStatus.COMPLETED
    assert ended.summary == {"members": 3, "not_completed": {}}
    assert ended.finished_at is not None
    assert Event.objects.filter(flow=flow, type="flow.completed", run=None).count() == 1


def test_a_sealed_flow_with_a_member_not_completed_fails_naming_it(flow):
    workflows.add_to_flow(flow, Broken, {}, member="a")
    workflows.add_to_flow(flow, Echo, {}, member="b", after=["a"])
    workflows.add_to_flow(flow, Echo, {}, member="c")
    workflows.seal_flow(flow)
    run_pending()
    ended = Flow.objects.get(pk=flow.pk)
    assert ended.status == FlowStatus.FAILED
    assert ended.summary == {
        "members": 3,
        "not_completed": {"a": RunStatus.FAILED, "b": RunStatus.CANCELLED},
    }
    failed = Event.objects.get(flow=flow, type="flow.failed")
    assert failed.payload["not_completed"] == {"a": "failed", "b": "cancelled"}


def test_an_unsealed_flow_stays_open_after_its_members_ended(flow):
    three(flow)
    run_pending()
    assert set(statuses(flow).values()) == {RunStatus.COMPLETED}
    assert flow_status(flow) == FlowStatus.OPEN


def test_sealing_a_flow_whose_members_ended_ends_it_at_once(flow):
    three(flow)
    run_pending()
    assert workflows.seal_flow(flow) == FlowStatus.COMPLETED
    assert flow_status(flow) == FlowStatus.COMPLETED


def test_sealing_an_empty_flow_completes_it(flow):
    assert workflows.seal_flow(flow) == FlowStatus.COMPLETED


def test_sealing_twice_is_a_no_op_and_a_cancelled_flow_cannot_be_sealed(flow):
    three(flow)
    workflows.seal_flow(flow)
    assert workflows.seal_flow(flow) == FlowStatus.SEALED
    assert Event.objects.filter(flow=flow, type="flow.sealed").count() == 1
    other = workflows.create_flow("other")
    workflows.cancel_flow(other)
    with pytest.raises(InvalidTransition):
        workflows.seal_flow(other)


def test_the_flow_ends_after_commit_when_its_last_member_ends(
    flow, django_capture_on_commit_callbacks
):
    a = workflows.add_to_flow(flow, Echo, {}, member="a")
    workflows.seal_flow(flow)
    with django_capture_on_commit_callbacks(execute=True):
        finish(a)
    assert flow_status(flow) == FlowStatus.COMPLETED


# -- cancel_flow ------------------------------------------------------------------------


def cancellable(flow: Flow) -> dict[str, Run]:
    """``done`` completed; ``booking`` running with its booking made (compensable);
    ``waiting`` blocked after it."""
    done = workflows.add_to_flow(flow, Echo, {}, member="done")
    finish(done)
    booking = workflows.add_to_flow(flow, Booking, {}, member="booking")
    finish(booking)  # its first step: booked
    waiting = workflows.add_to_flow(flow, Echo, {}, member="waiting", after=["booking"])
    return {"done": done, "booking": booking, "waiting": waiting}


def test_cancel_all_cancels_every_member_not_ended_with_compensation(flow):
    runs = cancellable(flow)
    assert workflows.cancel_flow(flow, "cancel_all", reason="release abandoned").cancelled == 2
    run_pending()
    assert statuses(flow) == {
        "done": RunStatus.COMPLETED,
        "booking": RunStatus.CANCELLED,
        "waiting": RunStatus.CANCELLED,
    }
    assert UNDONE == ["book"]
    booking = Run.objects.get(pk=runs["booking"].pk)
    assert booking.error["code"] == "flow_cancelled"
    assert booking.error["message"] == "release abandoned"
    assert flow_status(flow) == FlowStatus.CANCELLED
    cancelled = Event.objects.get(flow=flow, type="flow.cancelled")
    assert cancelled.payload["policy"] == "cancel_all"


def test_cancel_pending_cancels_only_blocked_members(flow):
    runs = cancellable(flow)
    assert workflows.cancel_flow(flow, "cancel_pending").cancelled == 1
    assert status(runs["waiting"]) == RunStatus.CANCELLED
    assert status(runs["booking"]) == RunStatus.RUNNING
    run_pending()
    assert status(runs["booking"]) == RunStatus.COMPLETED
    assert UNDONE == []
    assert flow_status(flow) == FlowStatus.CANCELLED


def test_flow_only_leaves_members_alone_and_closes_the_flow(flow):
    runs = cancellable(flow)
    assert workflows.cancel_flow(flow, "flow_only").cancelled == 0
    assert status(runs["booking"]) == RunStatus.RUNNING
    assert status(runs["waiting"]) == RunStatus.BLOCKED
    with pytest.raises(InvalidFlowChange):
        workflows.add_to_flow(flow, Echo, {}, member="more")
    with pytest.raises(InvalidFlowChange):
        workflows.add_dependency(flow, "done", "waiting")
    run_pending()  # the members go on: the blocked one starts when its upstream completes
    assert set(statuses(flow).values()) == {RunStatus.COMPLETED}
    assert flow_status(flow) == FlowStatus.CANCELLED


def test_cancel_flow_is_idempotent(flow):
    runs = cancellable(flow)
    first = workflows.cancel_flow(flow, "cancel_pending", reason="not needed")
    assert (first.cancelled, first.members) == (1, ("waiting",))
    # A repeat returns the stored record (its reason ignored) and cancels nothing more.
    assert workflows.cancel_flow(flow, "cancel_pending", reason="other") == first
    with pytest.raises(InvalidTransition, match="policy cancel_pending"):
        workflows.cancel_flow(flow, "cancel_all")
    assert Event.objects.filter(flow=flow, type="flow.cancelled").count() == 1
    assert status(runs["booking"]) == RunStatus.RUNNING


@pytest.mark.parametrize("policy", ["cancel_everything", "", None, 3])
def test_an_invalid_cancel_policy_is_refused(flow, policy):
    cancellable(flow)
    with pytest.raises(InvalidInput) as raised:
        workflows.cancel_flow(flow, policy)
    assert raised.value.details == {"field": "policy"}
    assert flow_status(flow) == FlowStatus.OPEN


def test_an_ended_flow_cannot_be_cancelled(flow):
    workflows.add_to_flow(flow, Echo, {}, member="a")
    workflows.seal_flow(flow)
    run_pending()
    with pytest.raises(InvalidTransition, match="has ended completed"):
        workflows.cancel_flow(flow)
    assert flow_status(flow) == FlowStatus.COMPLETED


# -- the history ------------------------------------------------------------------------


def test_a_flows_history_records_each_change(flow):
    a = workflows.add_to_flow(flow, Broken, {}, member="a")
    b = workflows.add_to_flow(flow, Echo, {}, member="b")
    c = workflows.add_to_flow(flow, Echo, {}, member="c", after=["b"])
    workflows.add_to_flow(flow, Echo, {}, member="d", after=["b"])
    workflows.add_dependency(flow, "a", "d")
    workflows.set_join(flow, "c", "any")
    workflows.seal_flow(flow)
    run_pending()
    history = list(Event.objects.filter(flow=flow).values_list("type", "run_id"))
    assert [kind for kind, _ in history] == [
        "flow.created",
        "flow.member_added",  # a: nothing to wait for, so it starts, never blocked
        "flow.member_added",  # b: the same
        "flow.member_added",
        "flow.edge_added",
        "flow.member_added",
        "flow.edge_added",
        "flow.edge_added",
        "flow.join_changed",
        "flow.sealed",
        "flow.dependency_failed",  # a fails first: d cannot start
        "flow.member_unblocked",  # b completes: c starts
        "flow.failed",
    ]
    whole_flow = {"flow.created", "flow.sealed", "flow.failed"}
    assert all((run_id is None) == (kind in whole_flow) for kind, run_id in history)
    # A member's flow events are in its own history too, beside its run's.
    assert list(
        Event.objects.filter(run=c, type__startswith="flow.").values_list("type", flat=True)
    ) == [
        "flow.member_added",
        "flow.edge_added",
        "flow.join_changed",
        "flow.member_unblocked",
    ]
    assert Event.objects.filter(run=a, type="run.failed").exists()
    assert Event.objects.filter(run=b, type="run.completed").exists()


def test_members_under_a_run_limit_take_their_places_after_the_upstreams_commit(
    flow, django_capture_on_commit_callbacks
):
    a = workflows.add_to_flow(flow, Echo, {}, member="a")
    first = workflows.add_to_flow(flow, Limited, {}, member="first", after=["a"])
    second = workflows.add_to_flow(flow, Limited, {}, member="second", after=["a"])
    with django_capture_on_commit_callbacks(execute=True):
        finish(a)
    assert [status(first), status(second)] == [RunStatus.RUNNING, RunStatus.QUEUED]
    run_pending()
    assert [status(first), status(second)] == [RunStatus.COMPLETED] * 2
    assert [started_events(first), started_events(second)] == [1, 1]


# -- settling many downstream members ---------------------------------------------------


def test_an_upstream_settles_a_thousand_downstream_members_in_batches(
    flow, django_capture_on_commit_callbacks
):
    root = workflows.add_to_flow(flow, Echo, {}, member="root")
    for i in range(1000):
        workflows.add_to_flow(flow, Echo, {}, member=f"d{i:04d}", after=["root"])
    with django_capture_on_commit_callbacks() as callbacks:
        finish(root)
    # The root's own transition decided one batch; the rest wait for its commit.
    counts = dict(Run.objects.filter(flow=flow).values_list("status").annotate(n=Count("id")))
    assert counts == {
        RunStatus.COMPLETED: 1,
        RunStatus.RUNNING: settle.FLOW_SETTLE_BATCH,
        RunStatus.BLOCKED: 1000 - settle.FLOW_SETTLE_BATCH,
    }
    with django_capture_on_commit_callbacks(execute=True):
        for callback in callbacks:
            callback()
    assert set(statuses(flow).values()) == {RunStatus.COMPLETED, RunStatus.RUNNING}
    # The root never waited: only the thousand that were blocked are unblocked.
    assert Event.objects.filter(flow=flow, type="flow.member_unblocked").count() == 1000
    assert Event.objects.filter(run__flow=flow, type="run.started").count() == 1001


def test_batches_left_undone_by_a_dead_process_are_settled_by_the_scanner(flow):
    root = workflows.add_to_flow(flow, Echo, {}, member="root")
    for i in range(settle.FLOW_SETTLE_BATCH + 5):
        workflows.add_to_flow(flow, Echo, {}, member=f"d{i:04d}", after=["root"])
    finish(root)  # the after-commit batches never run: the test's transaction never commits
    assert Run.objects.filter(flow=flow, status=RunStatus.BLOCKED).count() == 5
    assert repair_flows().done == 5
    assert not Run.objects.filter(flow=flow, status=RunStatus.BLOCKED).exists()


# -- the repair_flows backstop ----------------------------------------------------------


def test_the_scanner_starts_a_blocked_member_whose_join_is_satisfied(flow):
    done = workflows.add_to_flow(flow, Echo, {}, member="done")
    finish(done)
    workflows.add_to_flow(flow, Echo, {}, member="slow")
    stuck = workflows.add_to_flow(flow, Echo, {}, member="stuck", after=["slow"])
    # A state no transition leaves behind: the edge now comes from a completed upstream
    # that never settled it (written around the engine).
    edge = FlowEdge.objects.get(downstream__run=stuck)
    edge.upstream = FlowMember.objects.get(run=done)
    edge.save()
    assert status(stuck) == RunStatus.BLOCKED
    assert repair_flows(dry_run=True).found == 1
    assert status(stuck) == RunStatus.BLOCKED
    result = repair_flows()
    assert (result.found, result.done) == (1, 1)
    assert status(stuck) == RunStatus.RUNNING
    assert started_events(stuck) == 1
    assert repair_flows().found == 0


def test_the_scanner_leaves_a_waiting_member_blocked(flow):
    a, b, _ = three(flow)
    finish(a)  # b and c started
    d = workflows.add_to_flow(flow, Echo, {}, member="d", after=["b", "c"])
    finish(b)
    assert repair_flows().done == 0
    assert status(d) == RunStatus.BLOCKED


def test_the_scanner_ends_a_sealed_flow_whose_members_all_ended(flow):
    a = workflows.add_to_flow(flow, Echo, {}, member="a")
    workflows.seal_flow(flow)
    finish(a)  # its after-commit end of the flow never runs here
    assert flow_status(flow) == FlowStatus.SEALED
    result = repair_flows()
    assert (result.found, result.done) == (1, 1)
    assert flow_status(flow) == FlowStatus.COMPLETED
    assert repair_flows().found == 0


def test_the_scanner_passes_over_waiting_members_to_one_left_undecided(flow):
    """However many members wait as they should, the scanner's batch holds only members
    whose join is decided."""
    workflows.add_to_flow(flow, Echo, {}, member="done")
    finish(Run.objects.get(flow_member__name="done"))
    workflows.add_to_flow(flow, Echo, {}, member="slow")
    for i in range(3):  # one upstream completed, one running: waiting, rightly
        workflows.add_to_flow(flow, Echo, {}, member=f"waits{i}", after=["done", "slow"])
    stuck = workflows.add_to_flow(flow, Echo, {}, member="stuck", after=["slow"])
    FlowEdge.objects.filter(downstream__run=stuck).update(
        upstream=FlowMember.objects.get(name="done")
    )
    assert repair_flows(limit=1).done == 1
    assert status(stuck) == RunStatus.RUNNING


def test_the_scanners_query_agrees_with_the_join_rules(flow):
    """Every join over every mix of up to three upstream members completed, failed or
    running, in an open flow and a sealed one: the members the scanner's query finds
    are exactly those whose verdict is not waiting. States are written around the engine
    (members' joins, edges and statuses set by hand)."""
    pool = {"completed": "c", "failed": "f", "cancelled": "x", "running": "r"}
    for prefix in pool.values():
        for i in range(3):
            workflows.add_to_flow(flow, Echo, {}, member=f"{prefix}{i}")
    for run_status, prefix in pool.items():
        Run.objects.filter(flow=flow, flow_member__name__startswith=prefix).update(
            status=run_status
        )
    members = {member.name: member for member in FlowMember.objects.filter(flow=flow)}
    mixes = [
        (c, f, x, r)
        for c in range(4)
        for f in range(4)
        for x in range(2)
        for r in range(4)
        if c + f + x + r <= 3
    ]
    expected_edges = []
    for join in ("all", "any", 1, 2, 3):
        for c, f, x, r in mixes:
            name = f"{join}-{c}{f}{x}{r}"
            workflows.add_to_flow(flow, Echo, {}, member=name, after=["r0"], join=join)
            ups = [f"c{i}" for i in range(c)] + [f"f{i}" for i in range(f)]
            ups += [f"x{i}" for i in range(x)] + [f"r{i}" for i in range(r)]
            expected_edges.append((name, ups))
    FlowEdge.objects.filter(downstream__name__contains="-").delete()
    downstream = {member.name: member for member in FlowMember.objects.filter(flow=flow)}
    FlowEdge.objects.bulk_create(
        FlowEdge(flow=flow, upstream=members[up], downstream=downstream[name], revision=0)
        for name, ups in expected_edges
        for up in ups
    )
    for flow_state in (FlowStatus.OPEN, FlowStatus.SEALED):
        Flow.objects.filter(pk=flow.pk).update(status=flow_state)
        expected = set()
        for name, ups in expected_edges:
            member = downstream[name]
            rule = JoinRule.stored(member.join, member.join_count)
            ups_status = [status_of(up, pool) for up in ups]
            verdict = rule.verdict(ups_status, more_may_come=flow_state == FlowStatus.OPEN)
            if verdict is not Verdict.WAITING:
                expected.add(member.pk)
        assert set(settle.blocked_members_to_decide(10_000)) == expected, flow_state


def status_of(name: str, pool: dict[str, str]) -> str:
    return next(run_status for run_status, prefix in pool.items() if name.startswith(prefix))


def test_the_contract_names_as_written(django_user_model):
    """Every name of the issue's contract, called from ``workflows`` with its keywords."""
    operator = django_user_model.objects.create_user("flow-operator")
    flow = workflows.create_flow("contract", key="contract-1", user=operator)
    assert workflows.create_flow("contract", key="contract-1", user=operator).pk == flow.pk
    first = workflows.add_to_flow(
        flow, Echo.name, {"value": 1}, member="first", after=(), join="all", user=operator
    )
    second = workflows.add_to_flow(flow, Echo.name, {"value": 2}, member="second", user=operator)
    reader = workflows.add_to_flow(
        flow, Reader.name, {}, member="reader", after=("first",), join=1, user=operator
    )
    revision = Flow.objects.get(pk=flow.pk).revision
    assert (
        workflows.add_dependency(flow, "second", "reader", expected_revision=revision)
        == revision + 1
    )
    assert workflows.set_join(flow, "reader", "all") == revision + 2
    assert Run.objects.get(pk=reader.pk).status == RunStatus.BLOCKED
    waiting = workflows.explain(reader).as_dict()["waiting_on"]
    assert any(entry["kind"] == "blocked" for entry in waiting)
    run_pending()
    assert Run.objects.get(pk=reader.pk).output == {
        "read": {
            "first": {"output": {"answer": 1}, "status": "completed"},
            "second": {"output": {"answer": 2}, "status": "completed"},
        }
    }
    assert {Run.objects.get(pk=run.pk).status for run in (first, second)} == {"completed"}
    assert workflows.seal_flow(flow) == FlowStatus.COMPLETED
    other = workflows.create_flow("contract, cancelled")
    workflows.add_to_flow(other, Echo.name, {}, member="only")
    workflows.add_to_flow(other, Echo.name, {}, member="after", after=("only",))
    assert workflows.cancel_flow(other, policy="cancel_all", user=operator).cancelled == 2
    assert Flow.objects.get(pk=other.pk).status == FlowStatus.CANCELLED


def test_a_failure_reaching_a_member_twice_in_one_transition_cancels_it_once(flow):
    """x fails; a (after x) and b (after x and a) are both x's downstream. Deciding a
    cancels it, and b with it as a cascade; b, next in x's list, then reads cancelled
    and is left alone (found by the flow chaos test: a run read blocked before the
    cascade was cancelled again, and the transition failed with StaleState)."""
    x = workflows.add_to_flow(flow, Echo, {}, member="x")
    workflows.add_to_flow(flow, Echo, {}, member="a", after=["x"])
    b = workflows.add_to_flow(flow, Echo, {}, member="b", after=["x", "a"])
    finish(x, fail=True)
    assert statuses(flow) == {"x": "failed", "a": "cancelled", "b": "cancelled"}
    cancelled = Event.objects.filter(run=b, type="run.cancelled").count()
    assert cancelled == 1
