"""A flow's members as the flow page's picture: the run page's layout
(:mod:`workflows.admin.graph`), with member nodes.

Each node is a member: its name, its workflow, and its run's status with its join
(``all of 3``: it waits for all of its three upstream members); it is coloured by the
run's status (``wf-node st-<status>``, the run statuses' colours) and links to the
member run's page. An edge is drawn ``done`` once its upstream completed and ``broken``
once the upstream ended otherwise, so a failure's path through the flow shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from uuid import UUID

from django.utils.html import format_html
from django.utils.safestring import SafeString

from workflows.admin.graph import Geometry, Placed, draw, label
from workflows.queries.flows import MemberView
from workflows.status import RUN_FINAL, RunStatus

__all__ = ["FLOW_GEOMETRY", "MemberNode", "join_label", "member_graph_svg", "member_nodes"]

# Three lines of text: taller than a step's node.
FLOW_GEOMETRY = Geometry(node_width=170, node_height=66, column_gap=40, row_gap=16)
# What fits at the admin's font sizes (13 px bold name, 11 px lines); the node's
# tooltip and the members table give the full text.
NAME_CHARS = 19
LINE_CHARS = 26


@dataclass(frozen=True)
class MemberNode:
    """One member as drawn: name, upstream names, workflow, run status, join, link."""

    name: str
    after: tuple[str, ...]
    workflow: str
    status: str
    join: str
    href: str


def join_label(member: MemberView) -> str:
    """The member's join as the node and table show it: ``all of 3``, ``any of 2``,
    ``2 of 5``; empty for a member with no upstream (it waits for nothing)."""
    if not member.upstream:
        return ""
    return f"{member.join} of {len(member.upstream)}"


def member_nodes(members: Sequence[MemberView], run_url: Callable[[UUID], str]) -> list[MemberNode]:
    """The nodes of ``members``, each linking to ``run_url(run_id)``."""
    return [
        MemberNode(
            name=member.name,
            after=member.upstream,
            workflow=member.workflow,
            status=member.status,
            join=join_label(member),
            href=run_url(member.run_id),
        )
        for member in members
    ]


def _node(place: Placed[MemberNode]) -> SafeString:
    member = place.step
    status = member.status.replace("_", " ")
    state = f"{status} · {member.join}" if member.join else status
    tooltip = f"{member.name} ({member.workflow}): {status}"
    if member.after:
        tooltip += f"; waits for {member.join}: {', '.join(member.after)}"
    geometry = FLOW_GEOMETRY
    return format_html(
        '<a href="{}" class="wf-node st-{}"><title>{}</title>'
        '<rect x="{}" y="{}" width="{}" height="{}" rx="6"/>'
        '<text x="{}" y="{}" class="name">{}</text>'
        '<text x="{}" y="{}" class="state">{}</text>'
        '<text x="{}" y="{}" class="state">{}</text></a>',
        member.href,
        member.status,
        tooltip,
        place.x,
        place.y,
        geometry.node_width,
        geometry.node_height,
        place.x + 10,
        place.y + 21,
        label(member.name, NAME_CHARS),
        place.x + 10,
        place.y + 39,
        label(member.workflow, LINE_CHARS),
        place.x + 10,
        place.y + 55,
        label(state, LINE_CHARS),
    )


def _edge_state(upstream: MemberNode, downstream: MemberNode) -> str:
    if upstream.status == RunStatus.COMPLETED:
        return " done"
    return " broken" if upstream.status in RUN_FINAL else ""


def member_graph_svg(nodes: Sequence[MemberNode], *, title: str) -> SafeString:
    """The SVG element for ``nodes``: an image with a title, nodes linking to their runs."""
    return draw(nodes, title=title, node=_node, edge_classes=_edge_state, geometry=FLOW_GEOMETRY)
