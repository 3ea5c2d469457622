"""Healing a flow: a member brought back brings back what its end cancelled.

A member whose join can no longer be satisfied ends ``cancelled`` with
``dependency_failed`` (:mod:`.settle`). When an operator retries or reruns an upstream
member that had ended otherwise (failed, cancelled, terminated, compensated), every
member cancelled with ``dependency_failed`` because of it, transitively, goes back to
``blocked`` in the same transaction (:func:`heal_downstream`), provided its join is no
longer impossible with the revived members counted as unfinished; each starts once its
join is satisfied, by the usual release path (:func:`.settle.settle_downstream`). A flow
that had ended ``failed`` goes back to ``sealed`` (``flow.reopened``) and ends again by
the usual rule. Members cancelled by an operator or by ``cancel_flow`` have another
error code and stay cancelled; so do the members of a cancelled flow.

The replay verbs refuse a member cancelled with ``dependency_failed`` while its join is
not satisfied (:func:`check_dependencies`, :class:`~workflows.errors.DependencyUnmet`):
running it would run past a dependency. Retrying the failed upstream is the way.

**Locks.** The flow row is locked before any run (:mod:`workflows.engine.flows`), so a
replay verb of a member locks its flow first (:func:`lock_flow_of`), then the member's
run; healing then locks downstream runs, upstream before downstream. Holding the flow
row is what keeps a sealed flow from ending ``failed`` on statuses read before the
retry commits: ``finish_flow`` takes the same lock and reads the members' statuses
after it. The ``repair_flows`` scanner reopens a flow that reads ``failed`` while a
member runs all the same (:func:`reopen_failed_flow`), should anything leave one.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.engine.events import EventLog, actor
from workflows.engine.flows.graph import (
    flows_by_members,
    lock_flow,
    member_event,
    move_flow,
    upstream_statuses,
)
from workflows.engine.flows.joins import JoinRule, Verdict
from workflows.engine.flows.settle import decide
from workflows.engine.runs import reopen_cancelled_steps, set_run_status
from workflows.engine.scope import unlocked_scope
from workflows.engine.sql.locks import lock_run
from workflows.engine.transaction import transition
from workflows.errors import DependencyUnmet, StaleState
from workflows.models import Flow, FlowEdge, FlowMember, Run
from workflows.status import RUN_FINAL, FlowStatus, RunStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

DEPENDENCY_FAILED = "dependency_failed"
"""The error code of a member cancelled because its join could no longer be satisfied."""

# Flows whose members heal: a cancelled flow's members stay as its cancellation left them.
_HEALABLE = frozenset({FlowStatus.OPEN, FlowStatus.SEALED, FlowStatus.FAILED, FlowStatus.COMPLETED})
# The ends a flow comes back from when one of its members runs again: the flow then
# reads ``sealed`` while the member runs, never ended. A cancelled flow stays closed.
_REOPENABLE = (FlowStatus.FAILED, FlowStatus.COMPLETED)


def cancelled_for_dependency(status: str, error: object) -> bool:
    """Whether a run of ``status`` with ``error`` ended for a failed dependency."""
    return (
        status == RunStatus.CANCELLED
        and isinstance(error, dict)
        and error.get("code") == DEPENDENCY_FAILED
    )


def unmet_reason(
    rule: JoinRule, upstreams: list[tuple[str, str]], *, more_may_come: bool
) -> str | None:
    """Why a member cancelled with ``dependency_failed`` may not run again, in words;
    ``None`` once its join is satisfied. Shared by the verbs and the explanation."""
    verdict = rule.verdict((status for _, status in upstreams), more_may_come=more_may_come)
    if verdict is Verdict.SATISFIED:
        return None
    failed = [
        f"{name!r} ({status})"
        for name, status in upstreams
        if status in RUN_FINAL and status != RunStatus.COMPLETED
    ]
    if verdict is Verdict.IMPOSSIBLE:
        named = f"upstream {', '.join(failed)} ended otherwise" if failed else "none can come"
        return (
            f"its join ({rule.describe()}) is still impossible: {named}; retry the failed "
            "upstream member and this one follows"
        )
    unfinished = [f"{name!r} ({status})" for name, status in upstreams if status not in RUN_FINAL]
    return (
        f"its join ({rule.describe()}) is not satisfied yet: waiting for "
        f"{', '.join(unfinished) or 'more members'}; it starts by itself once it is"
    )


def lock_flow_of(run_id: UUID) -> None:
    """Lock the flow of ``run_id``'s member, if it is one, before the run is locked:
    the replay verbs' first statement (a run's flow never changes)."""
    flow_id = Run.objects.filter(pk=run_id).values_list("flow_id", flat=True).first()
    if flow_id is not None:
        lock_flow(flow_id)


def check_dependencies(run: Run, events: EventLog, user: AnyUser | None) -> bool:
    """Under the run's lock, before a replay verb changes anything: a member cancelled
    with ``dependency_failed`` is refused with :class:`DependencyUnmet` (naming the
    upstream members that ended otherwise) while its join is not satisfied. Once it is
    (its upstreams were brought back and completed some other way), the member is healed
    here, back to ``blocked`` and started at once, and ``True`` tells the verb it has
    nothing more to do."""
    if run.flow_id is None or not cancelled_for_dependency(run.status, run.error):
        return False
    member = FlowMember.objects.select_related("flow").get(run_id=run.pk)
    rule = JoinRule.stored(member.join, member.join_count)
    upstreams = upstream_statuses(member.pk)
    more_may_come = member.flow.status == FlowStatus.OPEN
    reason = unmet_reason(rule, upstreams, more_may_come=more_may_come)
    if reason is not None:
        raise DependencyUnmet(
            f"run {run.pk}: member {member.name!r} was cancelled because {reason}",
            member=member.name,
            failed_upstream=[
                name
                for name, status in upstreams
                if status in RUN_FINAL and status != RunStatus.COMPLETED
            ],
        )
    flow = lock_flow(member.flow_id)
    if flow.status not in _HEALABLE:
        raise DependencyUnmet(
            f"run {run.pk}: its flow {flow.name!r} is {flow.status}; its members stay ended",
            member=member.name,
        )
    _reopen_flow(flow, events, user, healed_from=member.name)
    _heal(member, run, flow, events, user, healed_from=member.name)
    decide(member, run, events, more_may_come=more_may_come, upstreams=upstreams)
    heal_downstream(run, events, user)
    return True


def heal_downstream(run: Run, events: EventLog, user: AnyUser | None) -> list[str]:
    """``run``, a member just brought back from an end, heals the members cancelled
    with ``dependency_failed`` downstream of it, transitively: each whose join is no
    longer impossible goes back to ``blocked``. A ``failed`` flow goes back to
    ``sealed`` first; so does a ``completed`` one (the member itself runs again, healed
    members or none). Returns the healed members' names, in the order healed."""
    if run.flow_id is None:
        return []
    flow = lock_flow(run.flow_id)
    if flow.status not in _HEALABLE:
        return []
    root = FlowMember.objects.values_list("id", "name").get(run_id=run.pk)
    _reopen_flow(flow, events, user, healed_from=root[1])
    more_may_come = flow.status == FlowStatus.OPEN
    healed: list[str] = []
    frontier = deque([root[0]])
    while frontier:
        upstream_id = frontier.popleft()
        candidates = (
            FlowEdge.objects.filter(
                upstream_id=upstream_id, downstream__run__status=RunStatus.CANCELLED
            )
            .select_related("downstream")
            .order_by("downstream_id")
        )
        for edge in candidates:
            member = edge.downstream
            down = lock_run(member.run_id)
            if not cancelled_for_dependency(down.status, down.error):
                continue
            rule = JoinRule.stored(member.join, member.join_count)
            statuses = (status for _, status in upstream_statuses(member.pk))
            if rule.verdict(statuses, more_may_come=more_may_come) is Verdict.IMPOSSIBLE:
                continue
            _heal(member, down, flow, events, user, healed_from=root[1])
            healed.append(member.name)
            frontier.append(member.pk)
    return healed


def _heal(
    member: FlowMember,
    run: Run,
    flow: Flow,
    events: EventLog,
    user: AnyUser | None,
    *,
    healed_from: str,
) -> None:
    """``cancelled → blocked``: nothing of the member had started; its steps, cancelled
    before they ran, are pending again."""
    reopened = reopen_cancelled_steps(run)
    healed = {"healed_by": healed_from, "by": actor(user)}
    set_run_status(
        run, RunStatus.BLOCKED, events, error=None, finished_at=None, event_details=healed
    )
    member_event(events, member, "flow.member_healed", **healed, reopened=reopened)


def _reopen_flow(flow: Flow, events: EventLog, user: AnyUser | None, *, healed_from: str) -> None:
    """A ``failed`` or ``completed`` flow goes back to ``sealed``: a member runs again.
    Its summary counts the times it was reopened, which its next end keeps."""
    if flow.status not in _REOPENABLE:
        return
    summary: dict[str, Any] = {
        "reopened": int((flow.summary or {}).get("reopened", 0)) + 1,
        "reopened_by": healed_from,
        "last_end": {k: v for k, v in (flow.summary or {}).items() if k != "last_end"},
    }
    if not move_flow(flow, FlowStatus.SEALED, summary, finished_at=None):
        raise StaleState(f"flow {flow.pk} changed while being reopened", flow=str(flow.pk))
    events.add_to_flow(
        flow.pk,
        "flow.reopened",
        flow=flow.name,
        member=healed_from,
        reopened=summary["reopened"],
        by=actor(user),
    )


def failed_flows_with_running_members(limit: int) -> list[UUID]:
    """Flows that read ``failed`` while a member is unfinished: what no verb leaves (a
    verb reopens the flow in the transaction that brings its member back), and the
    ``repair_flows`` scanner's backstop repairs should anything else."""
    return flows_by_members(FlowStatus.FAILED, ended=False, limit=limit)


@transition
def reopen_failed_flow(flow_id: UUID) -> bool:
    """Reopen a flow that reads ``failed`` while a member runs (the backstop); ``True``
    when it did. Under the flow's lock, which every verb ending or reopening it takes."""
    flow = lock_flow(flow_id)
    running = (
        Run.objects.filter(flow_id=flow_id)
        .exclude(status__in=RUN_FINAL)
        .order_by("created_at")
        .values_list("flow_member__name", flat=True)
        .first()
    )
    if flow.status != FlowStatus.FAILED or running is None:
        return False
    with unlocked_scope() as scope:
        _reopen_flow(flow, scope.events, None, healed_from=running)
    return True
