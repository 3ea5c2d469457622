"""Reading flows: one flow's graph as every surface shows it, and lists of flows.

A flow of 10,000 members is read with three queries (the flow, its members with their
runs' status, its edges), whatever its size: the admin's flow page, the API's flow
detail and ``workflows_flow show`` all read it through :func:`flow_graph`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db.models import Count, Q, QuerySet

from workflows.engine.flows.cancellation import FlowCancellation, cancellation_of
from workflows.engine.flows.joins import JoinRule
from workflows.errors import FlowNotFound
from workflows.models import Flow, FlowEdge, FlowMember
from workflows.status import RUN_FINAL, FlowStatus, RunStatus

__all__ = [
    "FlowGraph",
    "MemberView",
    "flow_cancellation",
    "flow_graph",
    "get_flow",
    "list_flows",
]


@dataclass(frozen=True)
class MemberView:
    """One member as shown: its run, the run's status, its join and its upstreams."""

    name: str
    run_id: UUID
    workflow: str
    status: str
    join: str | int
    join_words: str
    upstream: tuple[str, ...]
    error: dict[str, Any] | None

    @property
    def ended(self) -> bool:
        return self.status in RUN_FINAL


@dataclass(frozen=True)
class FlowGraph:
    """A flow with its members (in the order they were added) and its edges."""

    flow: Flow
    members: tuple[MemberView, ...]
    edges: tuple[tuple[str, str], ...]
    counts: dict[str, int] = field(default_factory=dict)

    def member(self, name: str) -> MemberView:
        """The member ``name`` (``KeyError`` naming it when there is none)."""
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(f"flow {self.flow.name!r} has no member {name!r}")

    def as_dict(self) -> dict[str, Any]:
        """The graph as JSON: what the API and ``workflows_flow show --json`` give."""
        flow = self.flow
        return {
            "id": str(flow.pk),
            "name": flow.name,
            "key": flow.key,
            "status": flow.status,
            "revision": flow.revision,
            "summary": flow.summary,
            "tags": flow.tags,
            "created_at": flow.created_at.isoformat(),
            "finished_at": flow.finished_at.isoformat() if flow.finished_at else None,
            "counts": self.counts,
            "members": [
                {
                    "name": member.name,
                    "run_id": str(member.run_id),
                    "workflow": member.workflow,
                    "status": member.status,
                    "join": member.join,
                    "upstream": list(member.upstream),
                    "error": member.error,
                }
                for member in self.members
            ],
            "edges": [{"upstream": up, "downstream": down} for up, down in self.edges],
        }


def get_flow(flow_id: UUID | str, *, flows: QuerySet[Flow] | None = None) -> Flow:
    """The flow with this id (or id as text), from ``flows`` (default: every flow):
    :class:`FlowNotFound` when there is none."""
    try:
        key = flow_id if isinstance(flow_id, UUID) else UUID(str(flow_id))
    except ValueError:
        raise FlowNotFound(f"{flow_id!r} is not a flow id", flow=str(flow_id)) from None
    found = (flows if flows is not None else Flow.objects.all()).filter(pk=key).first()
    if found is None:
        raise FlowNotFound(f"no flow has id {key}", flow=str(key))
    return found


def flow_graph(flow: Flow | UUID | str) -> FlowGraph:
    """The flow's members and edges, read in three queries."""
    found = flow if isinstance(flow, Flow) else get_flow(flow)
    rows = list(
        FlowMember.objects.filter(flow=found)
        .order_by("id")
        .values_list(
            "id",
            "name",
            "run_id",
            "run__workflow_name",
            "run__status",
            "join",
            "join_count",
            "run__error",
        )
    )
    names = {member_id: name for member_id, name, *_ in rows}
    edges = [
        (names[up], names[down])
        for up, down in FlowEdge.objects.filter(flow=found)
        .order_by("id")
        .values_list("upstream_id", "downstream_id")
    ]
    upstream: dict[str, list[str]] = {}
    for up, down in edges:
        upstream.setdefault(down, []).append(up)
    members = []
    counts: dict[str, int] = {}
    for _, name, run_id, workflow, status, join, count, error in rows:
        rule = JoinRule.stored(join, count)
        counts[status] = counts.get(status, 0) + 1
        members.append(
            MemberView(
                name=name,
                run_id=run_id,
                workflow=workflow,
                status=status,
                join=rule.spec,
                join_words=rule.describe(),
                upstream=tuple(upstream.get(name, ())),
                error=error if status != RunStatus.COMPLETED else None,
            )
        )
    return FlowGraph(found, tuple(members), tuple(edges), counts)


def flow_cancellation(flow: Flow) -> FlowCancellation | None:
    """How a cancelled flow was cancelled (policy, reason, who, the members cancelled and
    whether that is done); ``None`` for a flow not cancelled."""
    if flow.status != FlowStatus.CANCELLED:
        return None
    return cancellation_of(flow.pk)


def list_flows(*, status: str | None = None) -> QuerySet[Flow]:
    """Flows, newest first, each with its member count and how many are unfinished
    (``member_count``, ``unfinished``), optionally of one ``status``."""
    flows = Flow.objects.annotate(
        member_count=Count("runs"),
        unfinished=Count("runs", filter=~Q(runs__status__in=RUN_FINAL)),
    ).order_by("-created_at", "-id")
    return flows.filter(status=status) if status else flows
