"""The shapes the layout speaks in: the sizes it is given, and the places and routes it
hands back. Pure data, no Django."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = ["Geometry", "Layout", "Placed", "Point", "Route", "V", "Vertex"]

Point = tuple[int, int]


class Vertex(Protocol):
    """What the layout needs of a node: its name and its upstreams' names."""

    @property
    def name(self) -> str: ...

    @property
    def after(self) -> tuple[str, ...]: ...


V = TypeVar("V", bound=Vertex)


@dataclass(frozen=True)
class Geometry:
    """The size of a node and of the gaps between nodes, in pixels; ``edge_gap`` is
    the room kept between an edge routed past a box and the box, or another edge."""

    node_width: int = 150
    node_height: int = 54
    column_gap: int = 44
    row_gap: int = 18
    margin: int = 8
    edge_gap: int = 12


@dataclass(frozen=True)
class Placed(Generic[V]):
    """A node (a step, or a flow's member) at its place: column (layer), row within the
    column (counting the edges routed through it), pixel origin."""

    step: V
    column: int
    row: int
    x: int
    y: int


@dataclass(frozen=True)
class Route:
    """One edge's way from its source's right side to its target's left side: the
    points it passes, the first on the source, the last at the target's arrow."""

    source: str
    target: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class Layout(Generic[V]):
    """Every node placed and every edge routed, in the order the nodes were given."""

    placed: list[Placed[V]]
    routes: list[Route]
    geometry: Geometry

    @property
    def right(self) -> int:
        """The right edge of the rightmost box."""
        return max((place.x for place in self.placed), default=0) + self.geometry.node_width

    def clear_below(self, place: Placed[V]) -> bool:
        """Whether nothing (no box, no edge passing through) is below ``place`` in its
        column, so a line may drop straight from its bottom."""
        left, right = place.x, place.x + self.geometry.node_width
        bottom = place.y + self.geometry.node_height
        boxes = any(other.x == place.x and other.y > place.y for other in self.placed)
        edges = any(left <= x <= right and y > bottom for r in self.routes for x, y in r.points)
        return not boxes and not edges

    @property
    def bottom(self) -> int:
        """The bottom of the lowest box, or of the lowest edge routed past the boxes."""
        lowest = max((y for route in self.routes for _, y in route.points), default=0)
        boxes = max((place.y for place in self.placed), default=0) + self.geometry.node_height
        return max(boxes, lowest)
