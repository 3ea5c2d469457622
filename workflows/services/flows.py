"""The flow verbs every surface calls: build a flow of runs, seal it, cancel it.

A flow is named by the :class:`~workflows.models.Flow` itself, its id, or its id as
text; each verb resolves it and hands the engine's transition the id. Who may call them
is the verb table of :mod:`workflows.services.access` (``start_run`` to build and seal,
``operate_run`` to cancel), asked by the surfaces as for runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.definitions import Workflow
from workflows.engine.created import Created, value_of
from workflows.engine.flows import close, edges, members
from workflows.engine.flows.cancellation import CancelPolicy, FlowCancellation
from workflows.engine.flows.joins import JoinSpec
from workflows.errors import FlowNotFound
from workflows.models import Flow, Run
from workflows.permissions import OPERATE_RUN
from workflows.status import FlowStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = [
    "CancelPolicy",
    "FlowCancellation",
    "add_dependency",
    "add_dependency_once",
    "add_to_flow",
    "add_to_flow_once",
    "cancel_flow",
    "create_flow",
    "create_flow_once",
    "flow_id_of",
    "seal_flow",
    "set_join",
]


def flow_id_of(flow: Flow | UUID | str) -> UUID:
    """The flow's id from the flow, its id or its id as text: :class:`FlowNotFound`."""
    if isinstance(flow, Flow):
        return flow.pk
    try:
        flow_id = flow if isinstance(flow, UUID) else UUID(str(flow))
    except ValueError:
        raise FlowNotFound(f"{flow!r} is not a flow id", flow=str(flow)) from None
    if not Flow.objects.filter(pk=flow_id).exists():
        raise FlowNotFound(f"no flow has id {flow_id}", flow=str(flow_id))
    return flow_id


def may_end_members(user: AnyUser | None) -> Callable[[], bool] | None:
    """Whether a graph edit by ``user`` may cancel members at once (an edge from a member
    that ended otherwise, a join that can no longer be met): only a caller who may
    operate runs, as ending a run is an operator's verb. ``None`` (trusted code) may."""
    if user is None:
        return None
    return partial(user.has_perm, OPERATE_RUN)


def create_flow(
    name: str,
    *,
    key: str | None = None,
    user: AnyUser | None = None,
    tags: dict[str, str] | None = None,
) -> Flow:
    """A new open flow; with a ``key`` seen before, that same flow (idempotent).
    ``tags``: what its members start with unless given their own (docs/guide/tags.md);
    a bad tag is :class:`InvalidInput` naming it."""
    return members.create_flow(name, key=key, user=user, tags=tags)


def create_flow_once(
    name: str,
    *,
    key: str | None = None,
    user: AnyUser | None = None,
    tags: dict[str, str] | None = None,
) -> Created[Flow]:
    """As :func:`create_flow`, and whether this call created the flow (decided by the
    insert that won: of racing creations with one key exactly one says ``created``)."""
    return members.create_flow_once(name, key=key, user=user, tags=tags)


def add_to_flow_once(
    flow: Flow | UUID | str,
    workflow: str | type[Workflow],
    input: dict[str, Any] | None = None,
    *,
    member: str,
    after: Sequence[str] = (),
    join: JoinSpec = "all",
    user: AnyUser | None = None,
    tags: dict[str, str] | None = None,
) -> Created[Run]:
    """As :func:`add_to_flow`, and whether this call created the member (decided by the
    insert that won: of racing adds of one member exactly one says ``created``)."""
    return members.add_to_flow_once(
        flow_id_of(flow),
        workflow,
        input,
        member=member,
        after=after,
        join=join,
        user=user,
        may_end_members=may_end_members(user),
        tags=tags,
    )


add_to_flow = value_of(
    add_to_flow_once,
    "add_to_flow",
    """Add a run of ``workflow`` as member ``member``, waiting for the members in
    ``after`` under ``join`` (``"all"``, ``"any"`` or an int k); it starts at once when
    nothing holds it, else it is ``blocked``. Idempotent on ``member``: a repeat returns
    the same run. ``tags``: the member's own tags; without them it starts with the
    flow's (``create_flow(tags=...)``). As :func:`add_to_flow_once`, without saying who
    created it.""",
)


def add_dependency_once(
    flow: Flow | UUID | str,
    upstream: str,
    downstream: str,
    *,
    expected_revision: int | None = None,
    user: AnyUser | None = None,
) -> Created[int]:
    """As :func:`add_dependency`, and whether this call created the edge (decided by the
    insert that won: of racing stagings of one edge exactly one says ``created``)."""
    return edges.add_dependency_once(
        flow_id_of(flow),
        upstream,
        downstream,
        expected_revision=expected_revision,
        user=user,
        may_end_members=may_end_members(user),
    )


add_dependency = value_of(
    add_dependency_once,
    "add_dependency",
    """Stage the edge ``upstream → downstream``; return the flow's new revision (its
    current one for an edge that exists). As :func:`add_dependency_once`, without
    saying who created it.""",
)


def set_join(
    flow: Flow | UUID | str, member: str, join: JoinSpec, *, user: AnyUser | None = None
) -> int:
    """Change a blocked member's join; return the flow's new revision."""
    return edges.set_join(
        flow_id_of(flow), member, join, user=user, may_end_members=may_end_members(user)
    )


def seal_flow(flow: Flow | UUID | str, *, user: AnyUser | None = None) -> FlowStatus:
    """No more members or edges; the flow ends once its members have. Returns its status."""
    return close.seal_flow(flow_id_of(flow), user=user, may_end_members=may_end_members(user))


def cancel_flow(
    flow: Flow | UUID | str,
    policy: str = CancelPolicy.CANCEL_ALL,
    *,
    reason: str = "",
    user: AnyUser | None = None,
) -> FlowCancellation:
    """Close the flow and cancel its members by ``policy`` (``"cancel_all"``,
    ``"cancel_pending"``, ``"flow_only"``); returns the stored
    :class:`~workflows.engine.flows.cancellation.FlowCancellation` (policy, reason, who,
    the members cancelled and their number), the same on a repeated call. A repeat with
    another policy is refused (:class:`~workflows.errors.InvalidTransition`)."""
    return close.cancel_flow(flow_id_of(flow), policy, reason=reason, user=user)
