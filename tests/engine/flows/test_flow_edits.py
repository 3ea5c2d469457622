"""Only verbs end members (issue #35 point 3): a flow edit that would cancel a member at
once is refused with ``InvalidFlowChange`` naming the member unless the caller may
operate runs; allowed, the cancellation names the caller. And one rule for ``any`` and
``at least k`` joins in an open flow: both wait, judged impossible only once sealed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

import workflows
from tests.support.flows import add
from tests.support.workflows import Unit
from workflows import PermanentError, Retry, Task, Workflow
from workflows.engine import claim_step, fail_attempt
from workflows.errors import InvalidFlowChange
from workflows.models import Event, Flow, FlowEdge, FlowMember, Run, Step
from workflows.status import FlowStatus, RunStatus, StepStatus
from workflows.workers.scanners import repair_flows

pytestmark = pytest.mark.django_db


class OnePlace(Workflow):
    """A member needing a place is decided after its upstream's commit, not with it."""

    name = "flow_edits_one_place"
    max_concurrent_runs = 1
    work = Task("tests.support.handlers.noop", retry=Retry(max_attempts=1))


def user_with(name: str, *codenames: str) -> User:
    user = User.objects.create_user(name)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=user.pk)  # a fresh permission cache


@pytest.fixture
def starter() -> User:
    return user_with("starter", "start_run")


@pytest.fixture
def operator() -> User:
    return user_with("maintainer", "start_run", "operate_run")


def failed(flow: Flow, member: str) -> Run:
    run = add(flow, member)
    lease = claim_step(Step.objects.get(run=run, status=StepStatus.READY).pk, "test")
    fail_attempt(lease, PermanentError("failed on purpose"))
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED
    return run


def status(flow: Flow, member: str) -> str:
    return Run.objects.values_list("status", flat=True).get(flow=flow, flow_member__name=member)


def blocked_pair(flow: Flow) -> None:
    """``bad`` failed; ``gate`` running; ``down`` blocked after ``gate``."""
    failed(flow, "bad")
    add(flow, "gate")
    add(flow, "down", after=("gate",))


def test_an_edge_from_a_failed_member_is_refused_for_a_start_only_user(starter):
    flow = workflows.create_flow("edge")
    blocked_pair(flow)
    revision = Flow.objects.get(pk=flow.pk).revision
    with pytest.raises(InvalidFlowChange, match="would cancel member 'down' at once") as raised:
        workflows.add_dependency(flow, "bad", "down", user=starter)
    assert raised.value.code == "invalid_flow_change"
    assert raised.value.details["member"] == "down"
    assert "'bad' ended failed" in str(raised.value)
    assert status(flow, "down") == RunStatus.BLOCKED
    assert not FlowEdge.objects.filter(flow=flow, upstream__name="bad").exists()
    assert Flow.objects.get(pk=flow.pk).revision == revision


def test_an_operator_may_make_that_edge_and_the_cancellation_names_them(operator):
    flow = workflows.create_flow("edge allowed")
    blocked_pair(flow)
    workflows.add_dependency(flow, "bad", "down", user=operator)
    run = Run.objects.get(flow=flow, flow_member__name="down")
    assert (run.status, run.error["code"], run.error["by"]) == (
        RunStatus.CANCELLED,
        "dependency_failed",
        "maintainer",
    )
    event = Event.objects.get(flow=flow, type="flow.dependency_failed")
    assert (event.payload["member"], event.payload["by"]) == ("down", "maintainer")


def test_code_without_a_user_is_trusted():
    flow = workflows.create_flow("edge from code")
    blocked_pair(flow)
    workflows.add_dependency(flow, "bad", "down")
    assert status(flow, "down") == RunStatus.CANCELLED


def test_add_to_flow_after_a_failed_member_is_refused_and_nothing_is_created(starter):
    flow = workflows.create_flow("member")
    failed(flow, "bad")
    with pytest.raises(InvalidFlowChange, match="'late'"):
        workflows.add_to_flow(flow, Unit, {}, member="late", after=("bad",), user=starter)
    assert not FlowMember.objects.filter(flow=flow, name="late").exists()
    # An any join after the failed member waits while the flow is open: not refused.
    workflows.add_to_flow(flow, Unit, {}, member="late", after=("bad",), join="any", user=starter)
    assert status(flow, "late") == RunStatus.BLOCKED


def test_set_join_that_can_no_longer_be_met_is_refused(starter, operator):
    flow = workflows.create_flow("join")
    failed(flow, "bad")
    add(flow, "gate")
    add(flow, "down", after=("bad", "gate"), join="any")
    with pytest.raises(InvalidFlowChange, match="'down'"):
        workflows.set_join(flow, "down", "all", user=starter)
    assert FlowMember.objects.get(flow=flow, name="down").join == "any"
    workflows.set_join(flow, "down", "all", user=operator)
    assert status(flow, "down") == RunStatus.CANCELLED


def test_sealing_with_a_join_out_of_reach_is_refused_for_a_start_only_user(starter, operator):
    """The issue's example: a join of 2147483647 followed by seal_flow."""
    flow = workflows.create_flow("seal")
    add(flow, "gate")
    add(flow, "down", after=("gate",))
    workflows.set_join(flow, "down", 2147483647, user=starter)  # open: it waits
    assert status(flow, "down") == RunStatus.BLOCKED
    with pytest.raises(InvalidFlowChange, match="seal_flow would cancel member 'down'"):
        workflows.seal_flow(flow, user=starter)
    assert Flow.objects.get(pk=flow.pk).status == FlowStatus.OPEN
    workflows.seal_flow(flow, user=operator)
    run = Run.objects.get(flow=flow, flow_member__name="down")
    assert (run.status, run.error["by"]) == (RunStatus.CANCELLED, "maintainer")


@pytest.mark.parametrize("join", ["any", 1])
def test_any_and_at_least_k_follow_one_rule_in_an_open_flow(join):
    """Every upstream ended otherwise: both wait while the flow is open; sealing it
    cancels the member, for both alike."""
    flow = workflows.create_flow(f"rule {join}")
    failed(flow, "bad")
    add(flow, "down", after=("bad",), join=join)
    assert status(flow, "down") == RunStatus.BLOCKED
    # More upstreams may come, and then the member starts.
    workflows.add_to_flow(flow, Unit, {}, member="good")
    workflows.add_dependency(flow, "good", "down")
    assert status(flow, "down") == RunStatus.BLOCKED
    other = workflows.create_flow(f"rule {join} sealed")
    failed(other, "bad")
    add(other, "down", after=("bad",), join=join)
    workflows.seal_flow(other)
    assert status(other, "down") == RunStatus.CANCELLED


def cancellation_events(flow: Flow, member: str) -> list[tuple[str, dict]]:
    run = Run.objects.get(flow=flow, flow_member__name=member)
    return [
        (event.type, event.payload)
        for event in Event.objects.filter(run=run).order_by("id")
        if event.type in ("flow.dependency_failed", "run.cancelling", "run.cancelled")
        or event.type == "step.cancelled"
    ]


def assert_named(flow: Flow, *members: str) -> None:
    """Each member cancelled for ``dependency_failed`` and every cancellation event of
    it, flow and run, naming the operator."""
    for member in members:
        run = Run.objects.get(flow=flow, flow_member__name=member)
        assert (run.status, run.error["code"], run.error["by"]) == (
            RunStatus.CANCELLED,
            "dependency_failed",
            "maintainer",
        ), member
        events = cancellation_events(flow, member)
        types = [type for type, _ in events]
        assert {"flow.dependency_failed", "run.cancelling", "run.cancelled"} <= set(types), member
        assert [(type, payload.get("by")) for type, payload in events] == [
            (type, "maintainer") for type in types
        ], member


def test_a_cascade_of_an_edit_names_the_caller_in_every_cancellation_event(operator):
    """a -> b -> c: the operator's edge from a failed member cancels b, and c follows as
    a cascade of b in the same transition; every cancellation event of both names them."""
    flow = workflows.create_flow("cascade")
    blocked_pair(flow)  # bad failed; gate running; down blocked after gate
    add(flow, "last", after=("down",))
    workflows.add_dependency(flow, "bad", "down", user=operator)
    assert_named(flow, "down", "last")
    cascaded = Event.objects.get(flow=flow, type="flow.dependency_failed", payload__member="last")
    assert cascaded.payload["upstream"] == "down"


def test_a_cascade_decided_after_the_commit_still_names_the_caller(
    operator, django_capture_on_commit_callbacks
):
    """The member needing a place is decided in a transition of its own after the
    edit's commit: the caller is carried in its upstream's error."""
    flow = workflows.create_flow("cascade later")
    blocked_pair(flow)
    limited = workflows.add_to_flow(flow, OnePlace, {}, member="last", after=("down",))
    with django_capture_on_commit_callbacks() as callbacks:
        workflows.add_dependency(flow, "bad", "down", user=operator)
    assert Run.objects.get(pk=limited.pk).status == RunStatus.BLOCKED
    with django_capture_on_commit_callbacks(execute=True):
        for callback in callbacks:
            callback()
    assert_named(flow, "down", "last")


def test_a_cascade_left_to_the_scanner_still_names_the_caller(operator):
    """A process that died after the edit's commit: the scanner's backstop decides the
    cascade, and names the caller all the same."""
    flow = workflows.create_flow("cascade scanner")
    blocked_pair(flow)
    limited = workflows.add_to_flow(flow, OnePlace, {}, member="last", after=("down",))
    workflows.add_dependency(flow, "bad", "down", user=operator)  # on_commit never runs
    assert Run.objects.get(pk=limited.pk).status == RunStatus.BLOCKED
    repair_flows()
    assert_named(flow, "down", "last")


def test_an_upstream_that_merely_failed_names_no_one(operator):
    """Only a cascade of an edit names its caller: a member cancelled because its
    upstream failed on its own records no ``by``."""
    flow = workflows.create_flow("no edit")
    add(flow, "gate")
    add(flow, "down", after=("gate",))
    lease = claim_step(Step.objects.get(run__flow_member__name="gate").pk, "test")
    fail_attempt(lease, PermanentError("failed on purpose"))
    assert status(flow, "down") == RunStatus.CANCELLED
    assert "by" not in Run.objects.get(flow=flow, flow_member__name="down").error
    assert all("by" not in payload for _, payload in cancellation_events(flow, "down"))


@pytest.mark.parametrize("verb", ["cancel_run", "terminate_run"])
def test_a_cascade_of_an_operators_cancel_names_them(operator, verb):
    """An operator cancels (or terminates) a running member: its blocked downstream
    members end ``dependency_failed``, and every cancellation event of theirs names the
    operator, as a cascade of an edit does."""
    flow = workflows.create_flow("cancelled upstream")
    gate = add(flow, "gate")
    add(flow, "down", after=("gate",))
    add(flow, "last", after=("down",))
    getattr(workflows, verb)(gate, user=operator)
    assert_named(flow, "down", "last")
