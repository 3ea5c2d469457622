"""A laid-out graph as an inline SVG element, for any kind of node.

:func:`draw` lays out the nodes (:mod:`.layout`), draws each with the caller's
``node`` function, each edge as one ``<path class="wf-edge …">`` in absolute commands
(``data-from`` and ``data-to`` name its ends), and each jump back below them all.
Colours are CSS classes (``wf-node st-<status>``, ``wf-edge done``…) styled by
``workflows/console.css``, so a host theme can restyle them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from workflows.admin.graph.geometry import Geometry, Layout, Placed, Point, V
from workflows.admin.graph.layout import STEP_GEOMETRY, arrange
from workflows.admin.graph.routing import back_edge_points, path

__all__ = ["BackEdge", "draw", "label"]

# How far below the lowest box or edge the first back edge runs (room for its arrow
# going up), and the vertical room each back edge takes there: its line and its label.
BACK_EDGE_DROP = 24
BACK_EDGE_ROOM = 34


@dataclass(frozen=True)
class BackEdge:
    """A jump against the graph's direction (a loop going back to an earlier step),
    drawn below the nodes from ``source`` to ``target`` with ``text`` under it."""

    source: str
    target: str
    text: str


def label(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _back_edges(
    edges: Sequence[BackEdge], drawing: Layout[V]
) -> list[tuple[BackEdge, list[Point]]]:
    """Each back edge between two drawn nodes with its route, one level below another."""
    by_name = {place.step.name: place for place in drawing.placed}
    drawable = [edge for edge in edges if edge.source in by_name and edge.target in by_name]
    return [
        (
            edge,
            back_edge_points(
                by_name[edge.source],
                by_name[edge.target],
                drawing.bottom + BACK_EDGE_DROP + lane * BACK_EDGE_ROOM,
                lane,
                drawing.geometry,
                (
                    drawing.clear_below(by_name[edge.source]),
                    drawing.clear_below(by_name[edge.target]),
                ),
            ),
        )
        for lane, edge in enumerate(drawable)
    ]


def _back_edge(edge: BackEdge, points: list[Point]) -> SafeString:
    """The dashed jump along ``points``, its label centred under its lowest stretch."""
    depth = max(y for _, y in points)
    lowest = [x for x, y in points if y == depth]
    return format_html(
        '<g class="wf-back-edge"><title>{}</title>'
        '<path class="wf-edge back" d="{}" data-from="{}" data-to="{}" '
        'marker-end="url(#wf-arrow)"/>'
        '<text x="{}" y="{}" class="back-label" text-anchor="middle">{}</text></g>',
        f"{edge.source} goes back to {edge.target}: {edge.text}",
        path(points),
        edge.source,
        edge.target,
        sum(lowest) // len(lowest),
        depth + 14,
        edge.text,
    )


def draw(
    nodes: Sequence[V],
    *,
    title: str,
    node: Callable[[Placed[V]], SafeString],
    edge_classes: Callable[[V, V], str],
    geometry: Geometry = STEP_GEOMETRY,
    back_edges: Sequence[BackEdge] = (),
) -> SafeString:
    """The SVG element for ``nodes``: an image with a title, each node drawn by ``node``
    at its place, each edge (upstream, downstream) with the extra CSS classes
    ``edge_classes`` gives it (``""`` for none, else starting with a space), and each
    of ``back_edges`` between two of the nodes below them all."""
    if not nodes:
        return SafeString("")
    drawing = arrange(nodes, geometry)
    steps = {place.step.name: place.step for place in drawing.placed}
    backs = _back_edges(back_edges, drawing)
    width = max([drawing.right] + [x for _, points in backs for x, _ in points]) + geometry.margin
    height = drawing.bottom + (len(backs) * BACK_EDGE_ROOM + 14 if backs else 0) + geometry.margin
    edges = format_html_join(
        "",
        '<path class="wf-edge{}" d="{}" data-from="{}" data-to="{}" marker-end="url(#wf-arrow)"/>',
        (
            (edge_classes(steps[r.source], steps[r.target]), path(r.points), r.source, r.target)
            for r in drawing.routes
        ),
    )
    return format_html(
        '<svg class="wf-graph" xmlns="http://www.w3.org/2000/svg" role="img" '
        'aria-labelledby="wf-graph-title" width="{}" height="{}" viewBox="0 0 {} {}">'
        '<title id="wf-graph-title">{}</title>'
        '<defs><marker id="wf-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0 0 L10 5 L0 10 z" class="wf-arrow"/></marker></defs>'
        "{}{}{}</svg>",
        width,
        height,
        width,
        height,
        title,
        edges,
        format_html_join("", "{}", ((_back_edge(edge, points),) for edge, points in backs)),
        format_html_join("", "{}", ((node(place),) for place in drawing.placed)),
    )
