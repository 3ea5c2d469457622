"""Closing a flow: sealing it (no more members; it ends when they have). Cancelling it:
:mod:`.cancellation` (re-exported here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from uuid import UUID

from workflows.engine.events import actor
from workflows.engine.flows.cancellation import CancelPolicy, FlowCancellation, cancel_flow
from workflows.engine.flows.edits import FlowEdit
from workflows.engine.flows.graph import lock_flow
from workflows.engine.flows.settle import decide, end_if_done
from workflows.engine.scope import unlocked_scope
from workflows.engine.sql.locks import lock_run
from workflows.engine.sql.updates import move_row
from workflows.engine.transaction import transition
from workflows.errors import InvalidTransition
from workflows.models import Flow, FlowMember
from workflows.status import FlowStatus, JoinKind, RunStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = ["CancelPolicy", "FlowCancellation", "cancel_flow", "seal_flow"]


@transition
def seal_flow(
    flow_id: UUID,
    *,
    user: AnyUser | None = None,
    may_end_members: Callable[[], bool] | None = None,
) -> FlowStatus:
    """No more members or edges: the flow ends once every member has ended. Sealing a
    sealed flow changes nothing; an ended or cancelled flow is refused. Returns its
    status (it ends at once when every member has already ended). An ``any`` or
    ``at least k`` join that no member can meet any more once no more upstreams may
    come cancels its member: refused (``InvalidFlowChange``) unless
    ``may_end_members()`` (:mod:`.edits`)."""
    flow = lock_flow(flow_id)
    if flow.status == FlowStatus.SEALED:
        return FlowStatus.SEALED
    if flow.status != FlowStatus.OPEN:
        raise InvalidTransition(
            f"flow {flow.name!r} is {flow.status}; only an open flow can be sealed",
            flow=str(flow.pk),
            status=flow.status,
        )
    _close(flow, FlowStatus.SEALED)
    with unlocked_scope() as scope:
        scope.events.add_to_flow(flow.pk, "flow.sealed", flow=flow.name, by=actor(user))
        # An any or k-of-n join waiting for upstreams that can no longer come is decided
        # now (what an all join waits for does not depend on more members coming).
        waiting = FlowMember.objects.filter(
            flow=flow, join__in=(JoinKind.ANY, JoinKind.AT_LEAST), run__status=RunStatus.BLOCKED
        ).order_by("id")
        edit = FlowEdit("seal_flow", user, may_end_members)
        for member in waiting:
            run = lock_run(member.run_id)
            decide(member, run, scope.events, more_may_come=False, edit=edit)
        return end_if_done(flow, scope.events) or FlowStatus.SEALED


def _close(flow: Flow, status: FlowStatus) -> None:
    move_row(Flow, flow, status, f"flow {flow.pk}")
