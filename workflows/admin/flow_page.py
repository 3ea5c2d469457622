"""The flow page of the operator console: one flow's members, graph and history, in a
fixed number of queries.

The members and edges come from :func:`workflows.queries.flows.flow_graph` (three
queries whatever the flow's size) and one page of the flow's history from one more. A
flow of thousands of members is not drawn (a picture that size helps nobody) and its
members table is paginated, so the page stays bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.http import HttpRequest
from django.urls import reverse
from django.utils.safestring import SafeString

from workflows.admin.flow_actions import flow_offers
from workflows.admin.flow_graph import join_label, member_graph_svg, member_nodes
from workflows.admin.live.regions import (
    FLOW_REGIONS,
    POLL_INTERVAL_MS,
    flow_fingerprint,
    flow_settled,
    region_templates,
)
from workflows.admin.runs import badge, pretty
from workflows.holds import HoldKind
from workflows.models import Event, Flow
from workflows.queries.flows import FlowGraph, MemberView, flow_cancellation, flow_graph
from workflows.status import RUN_FINAL, RunStatus

__all__ = [
    "EVENTS_PER_PAGE",
    "GRAPH_LIMIT",
    "MEMBERS_PER_PAGE",
    "flow_page_context",
    "flow_regions_context",
]

# Members drawn at most; a larger flow is listed, not drawn.
GRAPH_LIMIT = 200
MEMBERS_PER_PAGE = 100
EVENTS_PER_PAGE = 50


@dataclass(frozen=True)
class MemberRow:
    """One line of the members table: the member, its join, its run's page, its error,
    and what a member that has not started waits on (the hold table's words)."""

    member: MemberView
    badge: SafeString
    waits: str
    join: str
    run_url: str
    error_code: str
    error_message: str


# A member whose run has not started waits as its status says: for its upstream
# members under its join, or for a place under its workflow's max_concurrent_runs.
_WAITING_MEMBERS: dict[str, HoldKind] = {
    RunStatus.BLOCKED: HoldKind.BLOCKED,
    RunStatus.QUEUED: HoldKind.QUEUED,
}


def _page(request: HttpRequest, parameter: str) -> int:
    """The page a query parameter asks for: 1 for anything that is not a number."""
    try:
        return max(int(request.GET.get(parameter, "1")), 1)
    except ValueError:
        return 1


def _member_rows(
    graph: FlowGraph, request: HttpRequest, run_url: Mapping[UUID, str]
) -> dict[str, Any]:
    page = _page(request, "members_page")
    start = (page - 1) * MEMBERS_PER_PAGE
    shown = graph.members[start : start + MEMBERS_PER_PAGE]
    rows = []
    for member in shown:
        error = member.error if isinstance(member.error, dict) else {}
        rows.append(
            MemberRow(
                member=member,
                badge=badge(member.status),
                waits=_WAITING_MEMBERS[member.status].label
                if member.status in _WAITING_MEMBERS
                else "",
                join=join_label(member),
                run_url=run_url[member.run_id],
                error_code=str(error.get("code") or error.get("type") or ""),
                error_message=str(error.get("message") or ""),
            )
        )
    return {
        "member_rows": rows,
        "members_page": page,
        "members_first": start + 1,
        "members_newer": page - 1 if page > 1 else None,
        "members_older": page + 1 if start + MEMBERS_PER_PAGE < len(graph.members) else None,
    }


def _history(flow: Flow, request: HttpRequest, names: Mapping[UUID, str]) -> dict[str, Any]:
    """One page of the flow's events, newest first, without a count: it fetches one row
    more than it shows to know whether an older page exists."""
    page = _page(request, "events_page")
    start = (page - 1) * EVENTS_PER_PAGE
    rows = list(
        Event.objects.filter(flow_id=flow.pk).order_by("-id")[start : start + EVENTS_PER_PAGE + 1]
    )
    return {
        "events": [
            (event, pretty(event.payload), names.get(event.run_id) if event.run_id else None)
            for event in rows[:EVENTS_PER_PAGE]
        ],
        "events_page": page,
        "events_newer": page - 1 if page > 1 else None,
        "events_older": page + 1 if len(rows) > EVENTS_PER_PAGE else None,
    }


def _counts(graph: FlowGraph) -> list[SafeString]:
    """Members by their run's status, most first, as badges: ``12 completed``, ..."""
    ordered = sorted(graph.counts.items(), key=lambda entry: (-entry[1], entry[0]))
    return [badge(status, f"{count} {status.replace('_', ' ')}") for status, count in ordered]


def flow_page_context(request: HttpRequest, flow: Flow, admin_name: str) -> dict[str, Any]:
    """Everything the flow page template shows about ``flow``: its live regions
    (:func:`flow_regions_context`), then one page of its history, which stays as rendered."""
    context = flow_regions_context(request, flow, admin_name)
    names = {member.run_id: member.name for member in context["flow_members"]}
    return {**context, **_history(flow, request, names)}


def flow_regions_context(request: HttpRequest, flow: Flow, admin_name: str) -> dict[str, Any]:
    """What the page's live regions (:data:`~workflows.admin.live.regions.FLOW_REGIONS`)
    show, read as the page reads it: the page renders them with it, and so does the
    live endpoint (:mod:`workflows.admin.live.pages`) while the flow goes on. The actions
    are the signed-in user's (:func:`~workflows.admin.flow_actions.flow_offers`)."""
    offered, withheld = flow_offers(request.user, flow, admin_name)
    graph = flow_graph(flow)
    run_url = {
        member.run_id: reverse(f"{admin_name}:workflows_run_change", args=[member.run_id])
        for member in graph.members
    }
    drawn = len(graph.members) <= GRAPH_LIMIT
    svg = (
        member_graph_svg(
            member_nodes(graph.members, run_url.__getitem__),
            title=f"Members of flow {flow.name} and the states of their runs",
        )
        if drawn
        else None
    )
    not_completed = (flow.summary or {}).get("not_completed")
    settled = flow_settled(flow.status, graph.counts)
    return {
        "flow": flow,
        "flow_members": graph.members,
        "badge": badge(flow.status),
        "final": settled,
        "graph": svg,
        "graph_limit": GRAPH_LIMIT,
        "member_count": len(graph.members),
        "edge_count": len(graph.edges),
        "unfinished": sum(member.status not in RUN_FINAL for member in graph.members),
        "counts": _counts(graph),
        "not_completed": [
            (name, badge(str(status))) for name, status in sorted(not_completed.items())
        ]
        if isinstance(not_completed, dict)
        else [],
        "summary": pretty(flow.summary) if flow.summary else None,
        "cancellation": flow_cancellation(flow),
        "allowed_actions": offered,
        "refused_actions": withheld,
        **_member_rows(graph, request, run_url),
        "live_regions": region_templates("flow", FLOW_REGIONS),
        "live_url": None
        if settled
        else reverse(f"{admin_name}:workflows_flow_live", args=[flow.pk]),
        "live_interval": POLL_INTERVAL_MS,
        "fingerprint": flow_fingerprint(flow.version, flow.status, flow.revision, graph.counts),
    }
