"""Deciding blocked members, settling a member's downstream when it ends, ending flows.

A blocked member is decided (:func:`decide`) under its run's lock from its upstreams'
committed statuses: started when its join is satisfied (taking a place under its
workflow's ``max_concurrent_runs``, or queued for one), cancelled with
``dependency_failed`` when the join can no longer be satisfied (which ends it, and so
settles its own downstream in the same transition), else left blocked. A member whose
run ends settles its downstream members in the same transition, at most
``FLOW_SETTLE_BATCH`` of them; the rest, and the flow's own end, follow in transitions of
their own right after its commit, and the ``repair_flows`` scanner (the sweeper's, and
``run_pending``'s in tests) does both for whatever a process that died left undone.
"""

from __future__ import annotations

from functools import partial
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q

from workflows.definitions import registry
from workflows.engine.events import EventLog
from workflows.engine.flows.graph import upstream_statuses
from workflows.engine.flows.joins import JoinRule, Verdict
from workflows.engine.limits import run_limits
from workflows.engine.runs import set_run_status, stop_forward_work, unwind, when_run_ends
from workflows.engine.scope import nested_scope, unlocked_scope
from workflows.engine.sql.connection import engine_alias
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.locks import lock_run
from workflows.engine.sql.updates import cas_update
from workflows.engine.transaction import transition
from workflows.errors import DefinitionMissing
from workflows.models import Flow, FlowEdge, FlowMember, Run
from workflows.status import RUN_FINAL, FlowStatus, RunStatus

FLOW_SETTLE_BATCH = 100
"""Downstream members one transition settles; more are settled by the next ones."""


def decide(
    member: FlowMember, run: Run, events: EventLog, *, more_may_come: bool
) -> Verdict | None:
    """Start, cancel or leave blocked the member whose run ``run`` this transition holds;
    ``None`` when it is no longer blocked (decided before)."""
    if run.status != RunStatus.BLOCKED:
        return None
    upstreams = upstream_statuses(member.pk)
    rule = JoinRule.stored(member.join, member.join_count)
    verdict = rule.verdict((status for _, status in upstreams), more_may_come=more_may_come)
    if verdict is Verdict.SATISFIED:
        _unblock(member, run, rule, events)
    elif verdict is Verdict.IMPOSSIBLE:
        failed = [(name, status) for name, status in upstreams if status in RUN_FINAL]
        _cancel_for_dependency(member, run, rule, failed, events)
    return verdict


def _unblock(member: FlowMember, run: Run, rule: JoinRule, events: EventLog) -> None:
    """``blocked →`` running (or queued for a place), its roots entered."""
    try:
        definition = registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing as missing:
        stop_forward_work(run, events, reason="definition missing")
        set_run_status(run, RunStatus.FAILED, events, error=missing.as_dict())
        return
    events.add_to_flow(
        member.flow_id, "flow.member_unblocked", run_id=run.pk, member=member.name, join=rule.spec
    )
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
    events.add(
        run.pk,
        "run.started",
        workflow=definition.name,
        version=definition.version,
        idempotency_key=run.idempotency_key,
        flow=str(member.flow_id),
        member=member.name,
    )
    scope.advancer.start()
    scope.close()


def _cancel_for_dependency(
    member: FlowMember,
    run: Run,
    rule: JoinRule,
    failed: list[tuple[str, str]],
    events: EventLog,
) -> None:
    """End the member ``cancelled`` with ``dependency_failed``: nothing of it started."""
    culprit, status = failed[0] if failed else ("", "")
    message = (
        f"upstream member {culprit!r} ended {status}: the join ({rule.describe()}) "
        "can no longer be satisfied"
        if failed
        else f"the flow is closed and the join ({rule.describe()}) can never be satisfied"
    )
    error: dict[str, Any] = {
        "code": "dependency_failed",
        "message": message,
        "upstream": culprit,
        "upstream_status": status,
        "member": member.name,
    }
    stop_forward_work(run, events, reason="dependency failed")
    set_run_status(run, RunStatus.CANCELLING, events, error=error)
    events.add_to_flow(
        member.flow_id,
        "flow.dependency_failed",
        run_id=run.pk,
        member=member.name,
        upstream=culprit,
        upstream_status=status,
    )
    unwind(run, events)


def _more_may_come(flow_id: UUID) -> bool:
    return Flow.objects.filter(pk=flow_id, status=FlowStatus.OPEN).exists()


def _decide_downstream(downstream: list[tuple[int, UUID]], events: EventLog) -> None:
    """Decide each downstream member (id, run id), locking its run (upstream first)."""
    if not downstream:
        return
    members = FlowMember.objects.in_bulk([member_id for member_id, _ in downstream])
    open_flows: dict[UUID, bool] = {}
    for member_id, run_id in downstream:
        run = lock_run(run_id)
        if run.status != RunStatus.BLOCKED:
            continue
        member = members[member_id]
        if member.flow_id not in open_flows:
            open_flows[member.flow_id] = _more_may_come(member.flow_id)
        decide(member, run, events, more_may_come=open_flows[member.flow_id])


def _downstream_of(member_id: int, after: int, limit: int) -> list[tuple[int, UUID]]:
    return list(
        FlowEdge.objects.filter(upstream_id=member_id, downstream_id__gt=after)
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
    alias = engine_alias()
    if len(batch) > FLOW_SETTLE_BATCH:
        after = batch[FLOW_SETTLE_BATCH - 1][0]
        transaction.on_commit(partial(settle_rest, member_id, after), using=alias)
    transaction.on_commit(partial(finish_flow, run.flow_id), using=alias)


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


@transition
def finish_flow(flow_id: UUID) -> FlowStatus | None:
    """End a sealed flow whose members have all ended: ``completed`` if every member
    completed, else ``failed`` with the members that did not in its summary. Returns
    the new status, ``None`` when the flow goes on."""
    flow = Flow.objects.select_for_update().filter(pk=flow_id, status=FlowStatus.SEALED).first()
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
    if not cas_update(
        Flow,
        flow.pk,
        version=flow.version,
        where={"status": FlowStatus.SEALED},
        status=status,
        summary=summary,
        finished_at=db_now(),
        updated_at=db_now(),
    ):
        return None
    flow.status, flow.summary = status, summary
    flow.version += 1
    events.add_to_flow(
        flow.pk, f"flow.{status}", flow=flow.name, members=len(statuses), not_completed=unfinished
    )
    return status


@transition
def repair_member(member_id: int) -> bool:
    """The scanner's backstop for one blocked member: decide it now. ``True`` when it
    started or was cancelled; a run another transaction holds raises ``RunBusy``."""
    member = FlowMember.objects.get(pk=member_id)
    with unlocked_scope() as scope:
        run = lock_run(member.run_id, wait=False)
        verdict = decide(member, run, scope.events, more_may_come=_more_may_come(member.flow_id))
        return verdict not in (None, Verdict.WAITING)


def blocked_members_to_decide(limit: int) -> list[int]:
    """Blocked members with an upstream that has ended, or with no upstream at all: the
    only ones whose verdict can be other than waiting."""
    ended = Count("upstream_edges", filter=Q(upstream_edges__upstream__run__status__in=RUN_FINAL))
    return list(
        FlowMember.objects.filter(run__status=RunStatus.BLOCKED)
        .annotate(ended=ended, edges=Count("upstream_edges"))
        .filter(Q(ended__gt=0) | Q(edges=0))
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )


def sealed_flows_to_end(limit: int) -> list[UUID]:
    """Sealed flows whose members have all ended (their end is left to this backstop
    when the process that ended the last member died before ending the flow)."""
    unfinished = Run.objects.filter(flow_id=OuterRef("pk")).exclude(status__in=RUN_FINAL)
    return list(
        Flow.objects.filter(status=FlowStatus.SEALED)
        .exclude(Exists(unfinished))
        .order_by("updated_at")
        .values_list("id", flat=True)[:limit]
    )
