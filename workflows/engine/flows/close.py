"""Closing a flow: sealing it (no more members; it ends when they have), cancelling it."""

from __future__ import annotations

import enum
import logging
from typing import TYPE_CHECKING
from uuid import UUID

from workflows.engine.events import actor
from workflows.engine.flows.graph import lock_flow
from workflows.engine.flows.settle import decide, end_if_done
from workflows.engine.scope import unlocked_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.locks import lock_run
from workflows.engine.sql.updates import move_row
from workflows.engine.transaction import transition
from workflows.engine.verbs.cancel import cancel_run
from workflows.errors import InvalidInput, InvalidTransition, WorkflowError
from workflows.models import Flow, FlowMember, Run
from workflows.status import RUN_FINAL, FlowStatus, JoinKind, RunStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

logger = logging.getLogger("workflows.engine")


class CancelPolicy(enum.StrEnum):
    """What ``cancel_flow`` does to the members."""

    # Cancel every member not ended (with compensation, as cancel_run does).
    CANCEL_ALL = "cancel_all"
    # Cancel only the members still blocked; started ones run on.
    CANCEL_PENDING = "cancel_pending"
    # Close the flow to new members and edges; leave every member alone.
    FLOW_ONLY = "flow_only"


@transition
def seal_flow(flow_id: UUID, *, user: AnyUser | None = None) -> FlowStatus:
    """No more members or edges: the flow ends once every member has ended. Sealing a
    sealed flow changes nothing; an ended or cancelled flow is refused. Returns its
    status (it ends at once when every member has already ended)."""
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
        # A k-of-n join waiting for upstreams that can no longer come is decided now
        # (what all and any joins wait for does not depend on more members coming).
        waiting = FlowMember.objects.filter(
            flow=flow, join=JoinKind.AT_LEAST, run__status=RunStatus.BLOCKED
        )
        for member in waiting:
            decide(member, lock_run(member.run_id), scope.events, more_may_come=False)
        return end_if_done(flow, scope.events) or FlowStatus.SEALED


def _close(flow: Flow, status: FlowStatus) -> None:
    ended = {"finished_at": db_now()} if status == FlowStatus.CANCELLED else {}
    move_row(Flow, flow, status, f"flow {flow.pk}", **ended)


def cancel_flow(
    flow_id: UUID,
    policy: str = CancelPolicy.CANCEL_ALL,
    *,
    reason: str = "",
    user: AnyUser | None = None,
) -> int:
    """Close the flow and apply ``policy`` to its members; return how many members were
    cancelled. Idempotent: a cancelled flow is closed already, and the policy is applied
    again to the members it still covers. A completed or failed flow is refused."""
    try:
        chosen = CancelPolicy(policy)
    except ValueError:
        raise InvalidInput(
            f"policy must be one of {', '.join(p.value for p in CancelPolicy)}, not {policy!r}",
            field="policy",
        ) from None
    _cancel(flow_id, chosen, reason, user)
    if chosen == CancelPolicy.FLOW_ONLY:
        return 0
    unfinished = Run.objects.filter(flow_id=flow_id).exclude(status__in=RUN_FINAL)
    # Blocked members first, newest first: each is cancelled for the flow's reason
    # (and counted) before an upstream's cancellation could end it dependency_failed.
    members = list(
        unfinished.filter(status=RunStatus.BLOCKED)
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)
    )
    if chosen == CancelPolicy.CANCEL_ALL:
        members += (
            unfinished.exclude(status=RunStatus.BLOCKED)
            .order_by("created_at", "id")
            .values_list("id", flat=True)
        )
    cancelled = 0
    why = reason or "flow cancelled"
    for run_id in members:
        try:
            if chosen == CancelPolicy.CANCEL_PENDING:
                cancelled += _cancel_blocked(run_id, why, user)
            else:
                # A member cancelled already (a cancelling one) is not counted again.
                if cancel_run(run_id, reason=why, user=user):
                    cancelled += 1
        except WorkflowError as exc:  # ended or moved on meanwhile
            logger.info("flow member %s not cancelled: %s", run_id, exc)
    return cancelled


@transition
def _cancel(flow_id: UUID, policy: CancelPolicy, reason: str, user: AnyUser | None) -> None:
    flow = lock_flow(flow_id)
    if flow.status in (FlowStatus.COMPLETED, FlowStatus.FAILED):
        raise InvalidTransition(
            f"flow {flow.name!r} has ended {flow.status}; there is nothing to cancel",
            flow=str(flow.pk),
            status=flow.status,
        )
    if flow.status == FlowStatus.CANCELLED:
        return
    _close(flow, FlowStatus.CANCELLED)
    with unlocked_scope() as scope:
        scope.events.add_to_flow(
            flow.pk,
            "flow.cancelled",
            flow=flow.name,
            policy=str(policy),
            reason=reason,
            by=actor(user),
        )


@transition
def _cancel_blocked(run_id: UUID, reason: str, user: AnyUser | None) -> int:
    """Cancel a member only while it is still blocked (under its lock): one that has
    started since runs on, as ``cancel_pending`` promises."""
    run = lock_run(run_id)
    if run.status != RunStatus.BLOCKED:
        return 0
    cancel_run(run_id, reason=reason, user=user)
    return 1
