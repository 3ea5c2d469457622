"""Changing a flow's graph between existing members: edges and joins."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from uuid import UUID

from workflows.engine.created import Created
from workflows.engine.events import actor
from workflows.engine.flows.edits import FlowEdit
from workflows.engine.flows.graph import (
    bump_revision,
    check_acyclic,
    check_name,
    check_not_self,
    check_open,
    check_revision,
    lock_blocked,
    lock_flow,
    member_event,
    members_named,
    write_edges,
)
from workflows.engine.flows.joins import JoinRule, JoinSpec
from workflows.engine.flows.settle import decide
from workflows.engine.scope import unlocked_scope
from workflows.engine.sql.locks import lock_run
from workflows.engine.sql.updates import cas_update
from workflows.engine.transaction import transition
from workflows.errors import StaleState
from workflows.models import FlowEdge, FlowMember

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


@transition
def add_dependency_once(
    flow_id: UUID,
    upstream: str,
    downstream: str,
    *,
    expected_revision: int | None = None,
    user: AnyUser | None = None,
    may_end_members: Callable[[], bool] | None = None,
) -> Created[int]:
    """Stage ``upstream → downstream``; return the flow's new revision (its current one
    when the edge exists already), and whether this call inserted the edge (``created``:
    the edge is looked up under the flow's lock, in the transaction that inserts it, so
    of racing stagings of one edge exactly one inserts it).

    Refused (:class:`~workflows.errors.InvalidFlowChange`): an unknown member, a self
    edge, an edge closing a cycle, a downstream already started, a closed flow;
    :class:`~workflows.errors.StaleRevision` when ``expected_revision`` is given and the
    graph has moved past it. The downstream is decided at once against the upstream's
    committed status: an upstream that has already completed counts; one that ended
    otherwise would cancel it at once, which is refused (``InvalidFlowChange``) unless
    ``may_end_members()`` (:mod:`.edits`).

    Of two writers staging against one revision, the second to lock the flow finds the
    revision moved. An upstream ending meanwhile is seen ended (its transition committed
    before the upstream's run was locked here), or sees this edge when it ends (this
    transition committed first): either way the downstream is decided on committed state.
    """
    check_name(upstream, field="upstream")
    check_name(downstream, field="downstream")
    check_not_self(upstream, downstream)
    flow = lock_flow(flow_id)
    up, down = members_named(flow, [upstream, downstream])
    if FlowEdge.objects.filter(upstream=up, downstream=down).exists():
        return Created(flow.revision, created=False)
    check_open(flow, "new edges")
    check_revision(flow, expected_revision)
    check_acyclic(up, down)
    lock_run(up.run_id)  # its end is either committed now, or will see this edge
    run = lock_blocked(down, "a new edge")
    revision = bump_revision(flow)
    with unlocked_scope() as scope:
        write_edges(flow, [up], down, revision, scope.events, by=actor(user))
        edit = FlowEdit("add_dependency", user, may_end_members)
        decide(down, run, scope.events, more_may_come=True, edit=edit)
    return Created(revision, created=True)


@transition
def set_join(
    flow_id: UUID,
    member: str,
    join: JoinSpec,
    *,
    user: AnyUser | None = None,
    may_end_members: Callable[[], bool] | None = None,
) -> int:
    """Change a blocked member's join; return the flow's new revision. The member is
    decided at once under its new join (one that can no longer be met is refused unless
    ``may_end_members()``, :mod:`.edits`)."""
    rule = JoinRule.parse(join)
    check_name(member, field="member")
    flow = lock_flow(flow_id)
    [target] = members_named(flow, [member])
    check_open(flow, "join changes")
    run = lock_blocked(target, "a join change")
    revision = bump_revision(flow)
    if not cas_update(
        FlowMember, target.pk, version=target.version, join=rule.kind, join_count=rule.count
    ):
        raise StaleState(f"member {member!r} changed while its join was being set")
    target.join, target.join_count = rule.kind, rule.count
    with unlocked_scope() as scope:
        member_event(
            scope.events,
            target,
            "flow.join_changed",
            join=rule.spec,
            revision=revision,
            by=actor(user),
        )
        edit = FlowEdit("set_join", user, may_end_members)
        decide(target, run, scope.events, more_may_come=True, edit=edit)
    return revision
