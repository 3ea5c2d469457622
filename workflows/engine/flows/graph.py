"""A flow's graph as the verbs that change it see it: the flow row, members, edges.

Every verb that changes the graph locks the flow row first (:func:`lock_flow`), then
the runs it must read, upstream before downstream, and ends with one compare-and-set of
the flow's ``revision`` (:func:`bump_revision`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Exists, OuterRef

from workflows.engine.events import EventLog
from workflows.engine.sql.expressions import SqlExpr, db_now
from workflows.engine.sql.flow_graph import reaches
from workflows.engine.sql.locks import lock_run
from workflows.engine.sql.updates import cas_update
from workflows.errors import (
    FlowNotFound,
    InvalidFlowChange,
    InvalidInput,
    StaleRevision,
    StaleState,
)
from workflows.models import Flow, FlowEdge, FlowMember, Run
from workflows.status import RUN_FINAL, FlowStatus, RunStatus
from workflows.validation import check_text, max_length


def check_name(value: object, *, field: str) -> str:
    """A member's name (or a flow's): a non-empty string the database stores."""
    text = check_text(value, field=field, limit=max_length(FlowMember, "name"))
    if not text.strip():
        raise InvalidInput(f"{field} must not be empty", field=field)
    return text


def check_not_self(upstream: str, downstream: str) -> None:
    """Refuse a self edge before anything is locked or read: whatever the member's
    state, that is the mistake to name."""
    if upstream == downstream:
        raise InvalidFlowChange(f"member {upstream!r} cannot depend on itself", member=upstream)


def lock_flow(flow_id: UUID) -> Flow:
    """The flow row, locked until commit (where the database locks rows).

    ``FOR NO KEY UPDATE``, as runs are locked (:func:`~workflows.engine.sql.locks.row_lock`):
    a member's transition that writes a flow event checks the event's foreign key with
    ``FOR KEY SHARE`` on this row, which ``FOR UPDATE`` would make wait for a verb that
    holds the flow, while that verb waits for the member's run: a deadlock.
    """
    try:
        return Flow.objects.select_for_update(no_key=True).get(pk=flow_id)
    except Flow.DoesNotExist:
        raise FlowNotFound(f"no flow has id {flow_id}", flow=str(flow_id)) from None


def check_open(flow: Flow, change: str) -> None:
    """Refuse ``change`` (words) to a flow that takes no more members or edges."""
    if flow.status != FlowStatus.OPEN:
        raise InvalidFlowChange(
            f"flow {flow.name!r} is {flow.status}: it takes no {change}",
            flow=str(flow.pk),
            status=flow.status,
        )


def check_revision(flow: Flow, expected: int | None) -> None:
    """:class:`StaleRevision` when the caller staged against another revision."""
    if expected is not None and expected != flow.revision:
        raise StaleRevision(
            f"flow {flow.name!r} is at revision {flow.revision}, not {expected}: its graph "
            "changed since it was read",
            flow=str(flow.pk),
            revision=flow.revision,
            expected_revision=expected,
        )


def bump_revision(flow: Flow) -> int:
    """The flow's next revision, compare-and-set on the open flow read under its lock."""
    if not cas_update(
        Flow,
        flow.pk,
        version=flow.version,
        where={"status": FlowStatus.OPEN, "revision": flow.revision},
        revision=flow.revision + 1,
        updated_at=db_now(),
    ):
        raise StaleState(f"flow {flow.pk} changed while its graph was being changed")
    flow.version += 1
    flow.revision += 1
    return flow.revision


def member_event(events: EventLog, member: FlowMember, type: str, **payload: Any) -> None:
    """An event of flow member ``member``: in its flow's history and in its run's."""
    events.add_to_flow(member.flow_id, type, run_id=member.run_id, member=member.name, **payload)


def move_flow(
    flow: Flow,
    status: FlowStatus,
    summary: dict[str, Any],
    finished_at: SqlExpr | datetime | None,
) -> bool:
    """Compare-and-set the flow from its status to ``status`` (it ends, or it is reopened)
    with its ``summary`` and ``finished_at``; the flow carries them and its new version
    after. ``False``: it moved meanwhile and nothing was written."""
    if not cas_update(
        Flow,
        flow.pk,
        version=flow.version,
        where={"status": flow.status},
        status=status,
        summary=summary,
        finished_at=finished_at,
        updated_at=db_now(),
    ):
        return False
    flow.status, flow.summary = status, summary
    flow.version += 1
    return True


def members_named(flow: Flow, names: Sequence[str]) -> list[FlowMember]:
    """The members of ``flow`` named in ``names``, in that order, read in one query
    however many; :class:`InvalidFlowChange` naming the first that is not a member."""
    found = {member.name: member for member in FlowMember.objects.filter(flow=flow, name__in=names)}
    for name in names:
        if name not in found:
            raise InvalidFlowChange(
                f"flow {flow.name!r} has no member {name!r}", flow=str(flow.pk), member=name
            )
    return [found[name] for name in names]


def lock_blocked(member: FlowMember, change: str) -> Run:
    """The member's run, locked; refused unless it is still ``blocked`` (not started)."""
    run = lock_run(member.run_id)
    if run.status != RunStatus.BLOCKED:
        raise InvalidFlowChange(
            f"member {member.name!r} has started (its run is {run.status}): {change} "
            "can change only a member still blocked",
            member=member.name,
            status=run.status,
        )
    return run


def check_acyclic(upstream: FlowMember, downstream: FlowMember) -> None:
    """Refuse ``upstream → downstream`` when it would close a cycle. The caller holds
    the flow, so no edge is staged meanwhile; it checks before locking any run, so it
    never waits for a run it would then refuse to wait on."""
    if reaches(downstream.pk, upstream.pk):
        raise InvalidFlowChange(
            f"an edge {upstream.name!r} → {downstream.name!r} would close a cycle: "
            f"{upstream.name!r} already waits for {downstream.name!r}",
            upstream=upstream.name,
            downstream=downstream.name,
        )


def write_edges(
    flow: Flow,
    upstreams: Sequence[FlowMember],
    downstream: FlowMember,
    revision: int,
    events: EventLog,
    *,
    by: str | None,
) -> None:
    """Write ``upstream → downstream`` for each upstream, at ``revision``, in one insert;
    ``by``: who staged them, as the history names them.

    The caller holds the flow and the upstreams' runs, has checked the downstream is
    blocked and that each edge is new, no self edge and closes no cycle (a member being
    added has no edges yet: none can).
    """
    FlowEdge.objects.bulk_create(
        FlowEdge(flow=flow, upstream=upstream, downstream=downstream, revision=revision)
        for upstream in upstreams
    )
    for upstream in upstreams:
        events.add_to_flow(
            flow.pk,
            "flow.edge_added",
            run_id=downstream.run_id,
            upstream=upstream.name,
            downstream=downstream.name,
            revision=revision,
            by=by,
        )


def flows_by_members(status: FlowStatus, *, ended: bool, limit: int) -> list[UUID]:
    """Up to ``limit`` flows in ``status`` whose members have all ended (``ended``), or
    not, the least recently updated first: what a scanner's backstop looks at."""
    unfinished = Run.objects.filter(flow_id=OuterRef("pk")).exclude(status__in=RUN_FINAL)
    flows = Flow.objects.filter(status=status)
    flows = flows.exclude(Exists(unfinished)) if ended else flows.filter(Exists(unfinished))
    return list(flows.order_by("updated_at").values_list("id", flat=True)[:limit])


def upstream_statuses(member_id: int) -> list[tuple[str, str]]:
    """(name, run status) of each upstream member, as committed (plus this transaction's
    own writes)."""
    return list(
        FlowEdge.objects.filter(downstream_id=member_id)
        .order_by("upstream_id")
        .values_list("upstream__name", "upstream__run__status")
    )
