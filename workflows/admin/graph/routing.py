"""The last phase of the layered layout: each edge's way between the boxes, and the
SVG path that draws it.

A forward edge leaves its source's right side and enters its target's left side; where
it skips layers it runs level through the place its dummy holds in each layer in
between (the layer's other items keep their distance from it, so no box is in the
way), and bends only in the gaps between layers, where there are no boxes. When several
edges enter (or leave) one box, each gets its own point on the side, in the order of
where they come from, so every edge into a join shows and they do not cross there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from workflows.admin.graph.geometry import Geometry, Placed, Point, Route, V
from workflows.admin.graph.layers import Chain, LayeredGraph

__all__ = ["back_edge_points", "path", "route_edges"]

# Room left clear of ports at the top and bottom of a box's side.
PORT_PAD_SHARE = 0.2
# The arrow's tip stops this short of the box it points at.
ARROW_ROOM = 3


def _ports(count: int, top: int, height: int) -> list[int]:
    """``count`` points spread along a side from ``top``, ``height`` long."""
    if count == 1:
        return [top + height // 2]
    pad = height * PORT_PAD_SHARE
    step = (height - 2 * pad) / (count - 1)
    return [round(top + pad + index * step) for index in range(count)]


def _port_of(
    chains: Sequence[Chain],
    end: Callable[[Chain], int],
    far: Callable[[Chain], int],
    y: Sequence[float],
    top: Callable[[int], int],
    height: int,
) -> dict[int, int]:
    """Each chain's port on the side of its ``end`` node, in the order of the ``far``
    item's height, so the edges at one side do not cross at the box."""
    by_node: dict[int, list[int]] = {}
    for index, chain in enumerate(chains):
        by_node.setdefault(end(chain), []).append(index)
    ports: dict[int, int] = {}
    for node, indexes in by_node.items():
        indexes.sort(key=lambda index: (y[far(chains[index])], index))
        ports.update(zip(indexes, _ports(len(indexes), top(node), height), strict=True))
    return ports


def route_edges(
    graph: LayeredGraph,
    placed: Sequence[Placed[V]],
    y: Sequence[float],
    column_x: Callable[[int], int],
    geometry: Geometry,
) -> list[Route]:
    """Every chain of ``graph`` as a route between the ``placed`` boxes, through its
    dummies' places (centre ``y``, in the layer at ``column_x``)."""
    chains = graph.chains

    def top(node: int) -> int:
        return placed[node].y

    outs = _port_of(chains, lambda c: c.source, lambda c: c.items[1], y, top, geometry.node_height)
    ins = _port_of(chains, lambda c: c.target, lambda c: c.items[-2], y, top, geometry.node_height)
    routes = []
    for index, chain in enumerate(chains):
        source, target = placed[chain.source], placed[chain.target]
        points: list[Point] = [(source.x + geometry.node_width, outs[index])]
        for dummy in chain.items[1:-1]:
            left, level = column_x(graph.layer_of[dummy]), round(y[dummy])
            points += [(left, level), (left + geometry.node_width, level)]
        points.append((target.x - ARROW_ROOM, ins[index]))
        routes.append(Route(source.step.name, target.step.name, tuple(points)))
    return routes


def path(points: Sequence[Point]) -> str:
    """An SVG path through ``points`` in absolute commands: a level or upright stretch
    as a line, any other as a curve that leaves and arrives level (its bend stays between the
    two points' ``x``, in the gap between layers)."""
    (x, y), *rest = points
    commands = [f"M{x} {y}"]
    for next_x, next_y in rest:
        if next_y == y or next_x == x:
            commands.append(f"L{next_x} {next_y}")
        else:
            middle = (x + next_x) // 2
            commands.append(f"C{middle} {y} {middle} {next_y} {next_x} {next_y}")
        x, y = next_x, next_y
    return " ".join(commands)


def back_edge_points(
    source: Placed[V], target: Placed[V], depth: int, lane: int, geometry: Geometry
) -> list[Point]:
    """A jump back from ``source`` to the earlier ``target``, routed around every box:
    down out of the source's bottom, along the gap right of its column down to
    ``depth`` (below all boxes), back along to the gap right of the target's column, up
    that gap and into the target's bottom. ``lane`` (0, 1, ...) keeps several such
    jumps apart in the gaps."""
    below = geometry.edge_gap // 2
    shift = min(10 + 5 * lane, geometry.column_gap - 6)
    width, height = geometry.node_width, geometry.node_height
    out_x, in_x = source.x + width + shift, target.x + width + shift
    source_x, target_x = source.x + width // 2, target.x + width // 2
    source_low, target_low = source.y + height + below, target.y + height + below
    return [
        (source_x, source.y + height),
        (source_x, source_low),
        (out_x, source_low),
        (out_x, depth),
        (in_x, depth),
        (in_x, target_low),
        (target_x, target_low),
        (target_x, target.y + height + ARROW_ROOM),
    ]
