"""Cancelling a flow, crash-safe: the flow closes first, its members are cancelled after.

``cancel_flow`` closes the flow and stores its policy, reason and actor in one
transaction; the members the policy covers are then cancelled one transaction each
(``cancel_run`` with the error code ``flow_cancelled`` and the flow's reason), blocked
members downstream-first so that none ends ``dependency_failed`` because an upstream was
cancelled before it. The last transaction stamps ``members_cancelled_at``. A process that
dies in between leaves a cancelled flow with ``members_cancelled_at`` NULL: the
``finish_flow_cancellations`` recovery scanner applies the stored policy again. Until then
no blocked member of such a flow starts (:func:`holds_blocked`), so a member the dead
process did not reach cannot start before the scanner cancels it.

A repeated call with the same policy finishes what is left and returns the stored
record; one with another policy is refused.
"""

from __future__ import annotations

import enum
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.contrib.auth import get_user_model

from workflows.engine.events import actor
from workflows.engine.flows.graph import lock_flow
from workflows.engine.scope import unlocked_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.locks import lock_run
from workflows.engine.sql.updates import cas_update, move_row
from workflows.engine.transaction import transition
from workflows.engine.verbs.cancel import cancel_run
from workflows.errors import InvalidInput, InvalidTransition, WorkflowError
from workflows.models import Flow, FlowEdge, FlowMember, Run
from workflows.status import RUN_FINAL, FlowStatus, RunStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

logger = logging.getLogger("workflows.engine")

FLOW_CANCELLED = "flow_cancelled"
"""The error code of a member that ``cancel_flow`` cancelled."""


class CancelPolicy(enum.StrEnum):
    """What ``cancel_flow`` does to the members."""

    # Cancel every member not ended (with compensation, as cancel_run does).
    CANCEL_ALL = "cancel_all"
    # Cancel only the members still blocked; started ones run on.
    CANCEL_PENDING = "cancel_pending"
    # Close the flow to new members and edges; leave every member alone.
    FLOW_ONLY = "flow_only"


@dataclass(frozen=True)
class FlowCancellation:
    """What ``cancel_flow`` stored and did: the same record for every repeated call.

    ``policy``, ``reason`` and ``by`` (the user's name, ``None`` for code) are those of
    the call that closed the flow; ``members``: the names of the members cancelled for
    it (error code ``flow_cancelled``), ``cancelled`` their number; ``complete``: every
    member the policy covers has been dealt with (else the recovery scanner finishes).
    """

    flow_id: UUID
    policy: CancelPolicy
    reason: str
    by: str | None
    cancelled: int
    members: tuple[str, ...]
    complete: bool

    def as_dict(self) -> dict[str, object]:
        """The record as the API and the commands show it."""
        return {
            "flow": str(self.flow_id),
            "policy": str(self.policy),
            "reason": self.reason,
            "by": self.by,
            "cancelled": self.cancelled,
            "members": list(self.members),
            "complete": self.complete,
        }


def parse_policy(policy: str) -> CancelPolicy:
    """The policy a caller names, or :class:`InvalidInput` listing the accepted ones."""
    try:
        return CancelPolicy(policy)
    except ValueError:
        raise InvalidInput(
            f"policy must be one of {', '.join(p.value for p in CancelPolicy)}, not {policy!r}",
            field="policy",
        ) from None


def cancel_flow(
    flow_id: UUID,
    policy: str = CancelPolicy.CANCEL_ALL,
    *,
    reason: str = "",
    user: AnyUser | None = None,
) -> FlowCancellation:
    """Close the flow, storing ``policy``, ``reason`` and the actor, then cancel the
    members the policy covers; return the :class:`FlowCancellation`.

    Idempotent: on a cancelled flow the stored policy is applied to what it still covers
    and the stored record returned (a different ``policy`` is refused with
    :class:`InvalidTransition`, a different reason is ignored). A completed or failed
    flow is refused.
    """
    chosen = parse_policy(policy)
    close_for_cancel(flow_id, chosen, reason, user)
    cancel_members(flow_id)
    return cancellation_of(flow_id)


@transition
def close_for_cancel(
    flow_id: UUID, policy: CancelPolicy, reason: str, user: AnyUser | None
) -> None:
    """The first transaction: the flow ends ``cancelled`` with its policy, reason and actor
    (``members_cancelled_at`` at once under ``flow_only``, which covers no member)."""
    flow = lock_flow(flow_id)
    if flow.status in (FlowStatus.COMPLETED, FlowStatus.FAILED):
        raise InvalidTransition(
            f"flow {flow.name!r} has ended {flow.status}; there is nothing to cancel",
            flow=str(flow.pk),
            status=flow.status,
        )
    if flow.status == FlowStatus.CANCELLED:
        if flow.cancel_policy and flow.cancel_policy != policy:
            raise InvalidTransition(
                f"flow {flow.name!r} was cancelled with policy {flow.cancel_policy}; it cannot "
                f"be cancelled again with {policy}",
                flow=str(flow.pk),
                policy=flow.cancel_policy,
            )
        return
    done: dict[str, Any] = (
        {"members_cancelled_at": db_now()} if policy == CancelPolicy.FLOW_ONLY else {}
    )
    move_row(
        Flow,
        flow,
        FlowStatus.CANCELLED,
        f"flow {flow.pk}",
        finished_at=db_now(),
        cancel_policy=str(policy),
        cancel_reason=reason,
        cancelled_by=user if isinstance(user, get_user_model()) else None,
        **done,
    )
    with unlocked_scope() as scope:
        scope.events.add_to_flow(
            flow.pk,
            "flow.cancelled",
            flow=flow.name,
            policy=str(policy),
            reason=reason,
            by=actor(user),
        )


def cancel_members(flow_id: UUID) -> bool:
    """Apply a cancelled flow's stored policy to its members, one transaction each, and
    stamp ``members_cancelled_at``; ``True`` when this call stamped it. What the scanner
    calls for a cancellation a dead process left half done."""
    flow = Flow.objects.select_related("cancelled_by").get(pk=flow_id)
    if flow.status != FlowStatus.CANCELLED or flow.members_cancelled_at is not None:
        return False
    policy = CancelPolicy(flow.cancel_policy or CancelPolicy.FLOW_ONLY)
    why = flow.cancel_reason or "flow cancelled"
    for run_id in _covered(flow_id, policy):
        try:
            _cancel_member(run_id, policy, why, flow.cancelled_by)
        except WorkflowError as exc:  # ended or moved on meanwhile
            logger.info("flow member %s not cancelled: %s", run_id, exc)
    return _stamp(flow_id)


def _covered(flow_id: UUID, policy: CancelPolicy) -> list[UUID]:
    """The runs the policy covers, in the order they are cancelled: blocked members
    downstream-first (the reverse of a topological order of the flow's graph), then,
    under ``cancel_all``, the started ones in the order they were added."""
    if policy == CancelPolicy.FLOW_ONLY:
        return []
    unfinished = Run.objects.filter(flow_id=flow_id).exclude(status__in=RUN_FINAL)
    blocked = dict(
        FlowMember.objects.filter(flow_id=flow_id, run__status=RunStatus.BLOCKED).values_list(
            "id", "run_id"
        )
    )
    order = [blocked[member] for member in reversed(_topological(flow_id)) if member in blocked]
    if policy == CancelPolicy.CANCEL_ALL:
        order += (
            unfinished.exclude(status=RunStatus.BLOCKED)
            .order_by("created_at", "id")
            .values_list("id", flat=True)
        )
    return order


def _topological(flow_id: UUID) -> list[int]:
    """The flow's members, every upstream before its downstream (ties by id)."""
    members = list(
        FlowMember.objects.filter(flow_id=flow_id).order_by("id").values_list("id", flat=True)
    )
    downstream: dict[int, list[int]] = defaultdict(list)
    waiting = dict.fromkeys(members, 0)
    for up, down in FlowEdge.objects.filter(flow_id=flow_id).values_list(
        "upstream_id", "downstream_id"
    ):
        downstream[up].append(down)
        waiting[down] += 1
    ready = [member for member in members if waiting[member] == 0]
    order: list[int] = []
    while ready:
        member = ready.pop(0)
        order.append(member)
        for down in sorted(downstream[member]):
            waiting[down] -= 1
            if waiting[down] == 0:
                ready.append(down)
    return order


@transition
def _cancel_member(run_id: UUID, policy: CancelPolicy, reason: str, user: AnyUser | None) -> bool:
    """Cancel one member under its lock; under ``cancel_pending`` only while it is still
    blocked (one started since runs on, as the policy promises)."""
    run = lock_run(run_id)
    if policy == CancelPolicy.CANCEL_PENDING and run.status != RunStatus.BLOCKED:
        return False
    return cancel_run(run_id, reason=reason, user=user, code=FLOW_CANCELLED)


@transition
def _stamp(flow_id: UUID) -> bool:
    """The last transaction: every covered member has been dealt with."""
    flow = lock_flow(flow_id)
    if flow.status != FlowStatus.CANCELLED or flow.members_cancelled_at is not None:
        return False
    return cas_update(
        Flow,
        flow.pk,
        version=flow.version,
        where={"status": FlowStatus.CANCELLED, "members_cancelled_at": None},
        members_cancelled_at=db_now(),
        updated_at=db_now(),
    )


def cancellation_of(flow_id: UUID) -> FlowCancellation:
    """The stored record of a cancelled flow's cancellation."""
    flow = Flow.objects.select_related("cancelled_by").get(pk=flow_id)
    members = tuple(
        FlowMember.objects.filter(flow_id=flow_id, run__error__code=FLOW_CANCELLED)
        .order_by("id")
        .values_list("name", flat=True)
    )
    return FlowCancellation(
        flow_id=flow.pk,
        policy=CancelPolicy(flow.cancel_policy or CancelPolicy.FLOW_ONLY),
        reason=flow.cancel_reason,
        by=actor(flow.cancelled_by),
        cancelled=len(members),
        members=members,
        complete=flow.members_cancelled_at is not None,
    )


def holds_blocked(flow_id: UUID) -> bool:
    """Whether the flow's blocked members must not start: it was cancelled with a policy
    that cancels them, whether or not that has happened yet."""
    return Flow.objects.filter(
        pk=flow_id,
        status=FlowStatus.CANCELLED,
        cancel_policy__in=(CancelPolicy.CANCEL_ALL, CancelPolicy.CANCEL_PENDING),
    ).exists()


def cancellations_to_finish(limit: int) -> list[UUID]:
    """Cancelled flows whose members' cancellation has not been stamped done (the partial
    index ``workflows_flow_cancelling`` holds exactly those)."""
    return list(
        Flow.objects.filter(status=FlowStatus.CANCELLED, members_cancelled_at__isnull=True)
        .order_by("updated_at")
        .values_list("id", flat=True)[:limit]
    )
