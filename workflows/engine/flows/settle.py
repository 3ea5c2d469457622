"""Deciding blocked members, settling a member's downstream when it ends, ending flows.

A blocked member is decided (:func:`decide`) under its run's lock from its upstreams'
committed statuses: started when its join is satisfied (taking a place under its
workflow's ``max_concurrent_runs``, or queued for one), cancelled with
``dependency_failed`` when the join can no longer be satisfied (which ends it, and so
settles its own downstream in the same transition), else left blocked. A member whose
run ends settles its downstream members in the same transition, at most
``FLOW_SETTLE_BATCH`` of them, without waiting for any (:func:`_decide_downstream`); the
rest, those it could not lock or that need a place, and the flow's own end follow in
transitions of their own right after its commit, and the ``repair_flows`` scanner (the
sweeper's, and ``run_pending``'s in tests) does all of that for whatever a process that
died left undone.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Count, F, Q

from workflows.definitions import registry
from workflows.engine.events import EventLog
from workflows.engine.flows.cancellation import holds_blocked
from workflows.engine.flows.edits import FlowEdit
from workflows.engine.flows.graph import (
    flows_by_members,
    member_event,
    move_flow,
    upstream_statuses,
)
from workflows.engine.flows.joins import JoinRule, Verdict
from workflows.engine.limits import run_limits
from workflows.engine.runs import (
    record_entry,
    set_run_status,
    stop_forward_work,
    unwind,
    when_run_ends,
)
from workflows.engine.scope import nested_scope, unlocked_scope
from workflows.engine.sql.connection import engine_alias
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.locks import lock_run
from workflows.engine.transaction import transition
from workflows.errors import DefinitionMissing, RunBusy
from workflows.models import Flow, FlowEdge, FlowMember, Run
from workflows.status import RUN_FINAL, FlowStatus, JoinKind, RunStatus

FLOW_SETTLE_BATCH = 100
"""Downstream members one transition settles; more are settled by the next ones."""


def decide(
    member: FlowMember,
    run: Run,
    events: EventLog,
    *,
    more_may_come: bool,
    upstreams: list[tuple[str, str]] | None = None,
    edit: FlowEdit | None = None,
    just_added: bool = False,
) -> Verdict | None:
    """Start, cancel or leave blocked the member whose run ``run`` this transition holds;
    ``None`` when it is no longer blocked (decided before). ``upstreams``: the (name,
    status) of every upstream member when the caller holds their runs (read otherwise).
    ``edit``: the graph edit deciding it, which must be allowed to cancel it
    (:mod:`.edits`). ``just_added``: the transition that adds the member decides it;
    started then, it was never seen blocked, so no ``flow.member_unblocked`` is
    recorded."""
    if run.status != RunStatus.BLOCKED:
        return None
    if upstreams is None:
        upstreams = upstream_statuses(member.pk)
    rule = JoinRule.stored(member.join, member.join_count)
    verdict = rule.verdict((status for _, status in upstreams), more_may_come=more_may_come)
    if verdict is Verdict.SATISFIED and holds_blocked(member.flow_id):
        # Cancelled with a policy that cancels it: it waits for that, never starts.
        return Verdict.WAITING
    if verdict is Verdict.SATISFIED:
        _unblock(member, run, rule, events, was_blocked=not just_added)
    elif verdict is Verdict.IMPOSSIBLE:
        failed = [
            (name, status)
            for name, status in upstreams
            if status in RUN_FINAL and status != RunStatus.COMPLETED
        ]
        if edit is not None:
            edit.check_may_end(member, _impossible(rule, failed))
            by = edit.by
        else:
            by = _edited_by(member.flow_id, failed)
        _cancel_for_dependency(member, run, rule, failed, events, by=by)
    return verdict


def _unblock(
    member: FlowMember, run: Run, rule: JoinRule, events: EventLog, *, was_blocked: bool
) -> None:
    """``blocked →`` running (or queued for a place), its roots entered;
    ``flow.member_unblocked`` recorded when it ``was_blocked`` in a committed state."""
    try:
        definition = registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing as missing:
        stop_forward_work(run, events, reason="definition missing")
        set_run_status(run, RunStatus.FAILED, events, error=missing.as_dict())
        return
    if was_blocked:
        member_event(events, member, "flow.member_unblocked", join=rule.spec)
    if not run_limits.admit(definition, run.pk):
        set_run_status(run, RunStatus.QUEUED, events)
        events.add(
            run.pk,
            "run.queued",
            priority=run.priority,
            max_concurrent_runs=run_limits.limit_of(definition.name),
        )
        return
    set_run_status(run, RunStatus.RUNNING, events, started_at=db_now())
    scope = nested_scope(run, events)
    if scope is None:  # its code was dropped meanwhile: failed instead
        return
    record_entry(events, run, definition, flow=str(member.flow_id), member=member.name)
    scope.advancer.start()
    scope.close()


def _edited_by(flow_id: UUID, failed: list[tuple[str, str]]) -> str | None:
    """Who ended the upstream this cancellation cascades from: the operator who
    cancelled or terminated it, or the caller of the graph edit whose cancellation it
    carries on (its ``dependency_failed`` error's ``by``). Read from the upstream's
    error, so that a cascade decided in a later transition, or by the scanner, still
    names them; ``None`` for an upstream that failed on its own."""
    if not failed or failed[0][1] not in (RunStatus.CANCELLED, RunStatus.TERMINATED):
        return None
    error = (
        Run.objects.filter(flow_id=flow_id, flow_member__name=failed[0][0])
        .values_list("error", flat=True)
        .first()
    )
    if not isinstance(error, dict) or error.get("code") not in _ENDED_BY_SOMEONE:
        return None
    by = error.get("by")
    return by if isinstance(by, str) and by else None


# The error codes of an upstream ended by someone, whose ``by`` a cascade carries on.
_ENDED_BY_SOMEONE = ("dependency_failed", "cancelled", "terminated", "flow_cancelled")


def _cancel_for_dependency(
    member: FlowMember,
    run: Run,
    rule: JoinRule,
    failed: list[tuple[str, str]],
    events: EventLog,
    *,
    by: str | None = None,
) -> None:
    """End the member ``cancelled`` with ``dependency_failed``: nothing of it started.
    ``by``: the caller of the graph edit that ended it, or that ended the upstream it
    cascades from (``None``: an upstream's own end); every cancellation event names it."""
    culprit, status = failed[0] if failed else ("", "")
    message = _impossible(rule, failed)
    edited = {"by": by} if by is not None else {}
    error: dict[str, Any] = {
        "code": "dependency_failed",
        "message": message,
        "upstream": culprit,
        "upstream_status": status,
        "member": member.name,
        **edited,
    }
    stop_forward_work(run, events, reason="dependency failed", by=by)
    set_run_status(run, RunStatus.CANCELLING, events, error=error, event_details=edited)
    member_event(
        events, member, "flow.dependency_failed", upstream=culprit, upstream_status=status, **edited
    )
    unwind(run, events)


def _impossible(rule: JoinRule, failed: list[tuple[str, str]]) -> str:
    """Why a join can no longer be satisfied, in words."""
    if failed:
        culprit, status = failed[0]
        return (
            f"upstream member {culprit!r} ended {status}: the join ({rule.describe()}) "
            "can no longer be satisfied"
        )
    return f"the flow is closed and the join ({rule.describe()}) can never be satisfied"


def _more_may_come(flow_id: UUID) -> bool:
    return Flow.objects.filter(pk=flow_id, status=FlowStatus.OPEN).exists()


def _decide_downstream(downstream: list[tuple[int, UUID]], events: EventLog) -> None:
    """Decide each blocked downstream member (id, run id) whose run is free now.

    The transition settling them already holds their upstream's run (and maybe more
    upstream of it), so it never waits for a downstream run: of two members failing at
    once, each cancelling its own downstream members, one could hold what the other
    waits for, and a verb holding a member it stages an edge from could wait for one
    this transition holds. A member another transaction holds is decided right after
    this one commits instead, by a transition that holds nothing else and waits for it
    (:func:`decide_later`), and so reads this transition's end as committed; the
    ``repair_flows`` scanner covers a process that dies before.

    So is a member whose workflow has ``max_concurrent_runs``: taking a place may wait
    for the slots of its workflow, which the transition ending an upstream of another
    workflow's member may hold (its own place, freed) while waiting for this one's.
    """
    if not downstream:
        return
    more_may_come: bool | None = None
    later: list[int] = []
    for member_id, run_id in downstream:
        # Each run is locked and decided before the next is read: deciding one may end
        # another of the list as a cascade in this transition, which then reads ended.
        try:
            run = lock_run(run_id, wait=False)
        except RunBusy:
            later.append(member_id)
            continue
        if run.status != RunStatus.BLOCKED:
            continue
        if run_limits.limit_of(run.workflow_name) is not None:
            later.append(member_id)
            continue
        # The member (its join) is read once its run is held: a join change holds the
        # run while it writes the join, so a read before could be the join it replaced
        # (a member then started under "any" after its join became "at least 2").
        member = FlowMember.objects.get(pk=member_id)
        if more_may_come is None:
            more_may_come = _more_may_come(member.flow_id)
        decide(member, run, events, more_may_come=more_may_come)
    if later:
        after_commit(partial(decide_later, later))


def decide_later(member_ids: list[int]) -> None:
    """Decide members a settling transition left (held by another transaction, or
    needing a place), each in a transition of its own that waits for the member's run."""
    for member_id in member_ids:
        repair_member(member_id, wait=True)


def _downstream_of(member_id: int, after: int, limit: int) -> list[tuple[int, UUID]]:
    """The blocked downstream members of ``member_id`` past ``after`` (by id): a member
    no longer blocked has been decided, and never is blocked again."""
    return list(
        FlowEdge.objects.filter(
            upstream_id=member_id,
            downstream_id__gt=after,
            downstream__run__status=RunStatus.BLOCKED,
        )
        .order_by("downstream_id")
        .values_list("downstream_id", "downstream__run_id")[:limit]
    )


@when_run_ends
def settle_downstream(run: Run, events: EventLog) -> None:
    """A member ended: decide its first downstream members in this transition; the
    rest, and the flow's end, right after it commits (and by the scanner regardless)."""
    if run.flow_id is None:
        return
    member_id = FlowMember.objects.values_list("id", flat=True).get(run_id=run.pk)
    batch = _downstream_of(member_id, 0, FLOW_SETTLE_BATCH + 1)
    _decide_downstream(batch[:FLOW_SETTLE_BATCH], events)
    if len(batch) > FLOW_SETTLE_BATCH:
        after_commit(partial(settle_rest, member_id, after=batch[FLOW_SETTLE_BATCH - 1][0]))
    after_commit(partial(finish_flow_if_done, run.flow_id))


def after_commit(work: Callable[[], object]) -> None:
    """Run ``work`` once this transition commits. What it raises is logged, not raised:
    the caller's own transition has committed and must not be reported failed; the
    ``repair_flows`` scanner does whatever ``work`` left undone."""
    transaction.on_commit(work, using=engine_alias(), robust=True)


def settle_rest(member_id: int, after: int) -> None:
    """Decide the downstream members of ``member_id`` after ``after``, a batch per
    transition."""
    while True:
        after = _settle_batch(member_id, after)
        if after == 0:
            return


@transition
def _settle_batch(member_id: int, after: int) -> int:
    """One batch; returns the last member decided, 0 when none was left."""
    batch = _downstream_of(member_id, after, FLOW_SETTLE_BATCH)
    with unlocked_scope() as scope:
        _decide_downstream(batch, scope.events)
    return batch[-1][0] if batch else 0


def finish_flow_if_done(flow_id: UUID) -> FlowStatus | None:
    """After a member's commit: end the flow if it is sealed and has no unfinished
    member. Two reads outside any transaction (one indexed row each) decide whether the
    transition is needed, so a member's end costs the same in a flow of 10 or 10,000
    members and no transaction at all while the flow is open. Of the last two members
    ending at once, the second to commit reads the first's end."""
    sealed = Flow.objects.filter(pk=flow_id, status=FlowStatus.SEALED).exists()
    if not sealed or Run.objects.filter(flow_id=flow_id).exclude(status__in=RUN_FINAL).exists():
        return None
    return finish_flow(flow_id)


@transition
def finish_flow(flow_id: UUID) -> FlowStatus | None:
    """End a sealed flow whose members have all ended: ``completed`` if every member
    completed, else ``failed`` with the members that did not in its summary. Returns
    the new status, ``None`` when the flow goes on."""
    flow = (
        Flow.objects.select_for_update(no_key=True)
        .filter(pk=flow_id, status=FlowStatus.SEALED)
        .first()
    )
    if flow is None:
        return None
    with unlocked_scope() as scope:
        return end_if_done(flow, scope.events)


def end_if_done(flow: Flow, events: EventLog) -> FlowStatus | None:
    """Under the flow's lock: end it if it is sealed and no member is unfinished."""
    statuses = dict(Run.objects.filter(flow_id=flow.pk).values_list("flow_member__name", "status"))
    if flow.status != FlowStatus.SEALED or any(s not in RUN_FINAL for s in statuses.values()):
        return None
    unfinished = {name: s for name, s in sorted(statuses.items()) if s != RunStatus.COMPLETED}
    status = FlowStatus.FAILED if unfinished else FlowStatus.COMPLETED
    summary: dict[str, Any] = {"members": len(statuses), "not_completed": unfinished}
    if (flow.summary or {}).get("reopened"):  # healed after an earlier end: say so
        summary["reopened"] = flow.summary["reopened"]
    if not move_flow(flow, status, summary, finished_at=db_now()):  # it is sealed: read above
        return None
    events.add_to_flow(
        flow.pk, f"flow.{status}", flow=flow.name, members=len(statuses), not_completed=unfinished
    )
    return status


@transition
def repair_member(member_id: int, *, wait: bool = False) -> bool:
    """Decide one blocked member now. ``True`` when it started or was cancelled. The
    scanner's backstop does not wait: a run another transaction holds raises
    ``RunBusy``."""
    run_id = FlowMember.objects.values_list("run_id", flat=True).get(pk=member_id)
    with unlocked_scope() as scope:
        run = lock_run(run_id, wait=wait)
        # Read under the run's lock, which a join change holds while it writes the join.
        member = FlowMember.objects.get(pk=member_id)
        verdict = decide(member, run, scope.events, more_may_come=_more_may_come(member.flow_id))
        return verdict not in (None, Verdict.WAITING)


def blocked_members_to_decide(limit: int) -> list[int]:
    """Blocked members whose join is decided by their upstreams' committed statuses: the
    members the backstop must start or cancel, and only those, so that however many
    members wait as they should, none left undecided is beyond ``limit``."""
    through = "upstream_edges__upstream__run__status"
    ended_otherwise = RUN_FINAL - {RunStatus.COMPLETED}
    return list(
        FlowMember.objects.filter(run__status=RunStatus.BLOCKED)
        .annotate(
            edges=Count("upstream_edges"),
            completed=Count("upstream_edges", filter=Q(**{through: RunStatus.COMPLETED})),
            ended_otherwise=Count(
                "upstream_edges", filter=Q(**{f"{through}__in": ended_otherwise})
            ),
        )
        .filter(_decided())
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )


def _decided() -> Q:
    """:meth:`JoinRule.verdict` other than waiting, over a member annotated with the
    number of its upstream members (``edges``), of those ``completed`` and of those
    ``ended_otherwise``; ``test_flows`` checks the two agree, join by join."""
    all_of = Q(completed=F("edges")) | Q(ended_otherwise__gt=0)
    closed = ~Q(flow__status=FlowStatus.OPEN)
    any_of = Q(completed__gt=0) | Q(edges=0) | (closed & Q(ended_otherwise=F("edges")))
    at_least = Q(completed__gte=F("join_count")) | (
        closed & Q(edges__lt=F("join_count") + F("ended_otherwise"))
    )
    return (
        (Q(join=JoinKind.ALL) & all_of)
        | (Q(join=JoinKind.ANY) & any_of)
        | (Q(join=JoinKind.AT_LEAST) & at_least)
    )


def sealed_flows_to_end(limit: int) -> list[UUID]:
    """Sealed flows whose members have all ended (their end is left to this backstop
    when the process that ended the last member died before ending the flow)."""
    return flows_by_members(FlowStatus.SEALED, ended=True, limit=limit)
