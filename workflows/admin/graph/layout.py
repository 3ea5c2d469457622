"""The layered layout, phase by phase: layers (:mod:`.layers`), the order within each
(:mod:`.ordering`), places across (:mod:`.placement`), edge routes (:mod:`.routing`).

Layers run left to right, one column each; within a column the boxes and the edges
passing through it are stacked top to bottom. Pure geometry, no Django: the SVG is
drawn from its result by :mod:`.svg`.
"""

from __future__ import annotations

from collections.abc import Sequence

from workflows.admin.graph.geometry import Geometry, Layout, Placed, V
from workflows.admin.graph.layers import LayeredGraph, layered_graph
from workflows.admin.graph.ordering import order_layers
from workflows.admin.graph.placement import place_items
from workflows.admin.graph.routing import route_edges

__all__ = ["STEP_GEOMETRY", "arrange", "layout"]

STEP_GEOMETRY = Geometry()


def _layered(nodes: Sequence[V]) -> LayeredGraph:
    index = {node.name: position for position, node in enumerate(nodes)}
    ups = [[index[up] for up in node.after if up in index] for node in nodes]
    graph = layered_graph(len(nodes), ups)
    order_layers(graph)
    return graph


def arrange(nodes: Sequence[V], geometry: Geometry = STEP_GEOMETRY) -> Layout[V]:
    """Every node of ``nodes`` placed and every edge (upstream, node) routed."""
    graph = _layered(nodes)

    def height(item: int) -> int:
        return 0 if graph.is_dummy(item) else geometry.node_height

    def spacing(upper: int, lower: int) -> float:
        boxes = not graph.is_dummy(upper) and not graph.is_dummy(lower)
        gap = geometry.row_gap if boxes else geometry.edge_gap
        return (height(upper) + height(lower)) / 2 + gap

    def column_x(layer: int) -> int:
        return geometry.margin + layer * (geometry.node_width + geometry.column_gap)

    centres = place_items(graph, spacing)
    top = min((centre - height(item) / 2 for item, centre in enumerate(centres)), default=0.0)
    y = [centre - top + geometry.margin for centre in centres]
    row = {item: position for layer in graph.layers for position, item in enumerate(layer)}
    placed = [
        Placed(
            step=node,
            column=graph.layer_of[item],
            row=row[item],
            x=column_x(graph.layer_of[item]),
            y=round(y[item] - geometry.node_height / 2),
        )
        for item, node in enumerate(nodes)
    ]
    return Layout(placed, route_edges(graph, placed, y, column_x, geometry), geometry)


def layout(nodes: Sequence[V], geometry: Geometry = STEP_GEOMETRY) -> list[Placed[V]]:
    """Each node of ``nodes`` at its place (see :func:`arrange` for the edges too)."""
    return arrange(nodes, geometry).placed
