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


def _down_from(
    place: Placed[V], clear: bool, lane_x: int, depth: int, geometry: Geometry
) -> list[Point]:
    """From the bottom of ``place`` down to ``depth``: straight when nothing is below it
    in its column, else by a short step under it and the gap right of its column."""
    middle, bottom = place.x + geometry.node_width // 2, place.y + geometry.node_height
    if clear:
        return [(middle, bottom), (middle, depth)]
    below = bottom + geometry.edge_gap // 2
    return [(middle, bottom), (middle, below), (lane_x, below), (lane_x, depth)]


def back_edge_points(
    source: Placed[V],
    target: Placed[V],
    depth: int,
    lane: int,
    geometry: Geometry,
    clear: tuple[bool, bool] = (True, True),
) -> list[Point]:
    """A jump back from ``source`` to the earlier ``target``, routed around every box:
    down out of the source's bottom to ``depth`` (below all boxes), back along, and up
    into the target's bottom. Where a box or an edge is below the source (or the
    target) in its column, as ``clear`` says, the line steps aside under the box into
    the gap right of its column. ``lane`` (0, 1, ...) keeps several jumps apart there."""
    shift = min(10 + 5 * lane, geometry.column_gap - 6)
    right = geometry.node_width + shift
    down = _down_from(source, clear[0], source.x + right, depth, geometry)
    up = _down_from(target, clear[1], target.x + right, depth, geometry)[::-1]
    end_x, end_y = up[-1]
    return down + up[:-1] + [(end_x, end_y + ARROW_ROOM)]
