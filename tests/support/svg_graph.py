"""Reading a drawn graph back out of its SVG, and what a reader would call wrong with
it: an edge through a box, boxes on top of each other, a path in relative commands.

Works on the markup alone (``xml.etree``), so it checks what a browser would show, not
what the layout meant to draw.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from xml.etree import ElementTree

SVG = "{http://www.w3.org/2000/svg}"
# How far inside a box an edge's sample point must be to count as passing through it,
# and how far from a box an edge may start or end and still belong to it.
INSIDE = 1.0
NEAR = 4.0
COMMAND = re.compile(r"([A-Za-z])([^A-Za-z]*)")
ARITY = {"M": 2, "L": 2, "Q": 4, "C": 6}

Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    title: str
    left: float
    top: float
    right: float
    bottom: float

    def holds(self, point: Point, inset: float) -> bool:
        x, y = point
        return (
            self.left + inset < x < self.right - inset
            and self.top + inset < y < self.bottom - inset
        )


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    classes: str
    d: str


@dataclass(frozen=True)
class Drawing:
    boxes: list[Box]
    edges: list[Edge]

    def pairs(self) -> Counter[tuple[str, str]]:
        """How many forward edges are drawn from each node to each."""
        return Counter((e.source, e.target) for e in self.edges if "back" not in e.classes)


def read(svg: str) -> Drawing:
    """The boxes (each ``<rect>`` in a ``.wf-node``, with the node's tooltip) and the
    edges (each ``path.wf-edge``) of ``svg``."""
    root = ElementTree.fromstring(svg)
    boxes = []
    for node in root.iter():
        if "wf-node" in node.get("class", "").split():
            rect, title = node.find(f"{SVG}rect"), node.find(f"{SVG}title")
            assert rect is not None and title is not None
            x, y = float(rect.get("x", 0)), float(rect.get("y", 0))
            width, height = float(rect.get("width", 0)), float(rect.get("height", 0))
            boxes.append(Box(title.text or "", x, y, x + width, y + height))
    edges = [
        Edge(
            path.get("data-from", ""),
            path.get("data-to", ""),
            path.get("class", ""),
            path.get("d", ""),
        )
        for path in root.iter(f"{SVG}path")
        if "wf-edge" in path.get("class", "").split()
    ]
    return Drawing(boxes, edges)


def _bezier(points: list[Point], t: float) -> Point:
    while len(points) > 1:
        points = [
            (a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t)
            for a, b in itertools.pairwise(points)
        ]
    return points[0]


def samples(d: str, steps: int = 40) -> list[Point]:
    """Points along path ``d`` (absolute M, L, Q and C only: anything else raises)."""
    here: Point = (0.0, 0.0)
    points: list[Point] = []
    for command, numbers in COMMAND.findall(d):
        values = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", numbers)]
        if command not in ARITY or len(values) != ARITY[command]:
            raise ValueError(f"not an absolute M/L/Q/C command: {command}{numbers}")
        ends = [(values[i], values[i + 1]) for i in range(0, len(values), 2)]
        if command != "M":
            points += [_bezier([here, *ends], step / steps) for step in range(steps + 1)]
        here = ends[-1]
        points.append(here)
    return points


def _end_box(boxes: list[Box], point: Point) -> Box | None:
    near = [box for box in boxes if box.holds(point, -NEAR)]
    return near[0] if len(near) == 1 else None


def problems(svg: str) -> list[str]:
    """What is wrong with the drawing in ``svg``, in words; empty when nothing is."""
    drawing = read(svg)
    found = []
    for index, box in enumerate(drawing.boxes):
        for other in drawing.boxes[index + 1 :]:
            if (
                box.left < other.right
                and other.left < box.right
                and box.top < other.bottom
                and other.top < box.bottom
            ):
                found.append(f"boxes overlap: {box.title} and {other.title}")
    for edge in drawing.edges:
        name = f"edge {edge.source} → {edge.target}"
        try:
            points = samples(edge.d)
        except ValueError as error:
            found.append(f"{name}: {error}")
            continue
        ends = [_end_box(drawing.boxes, points[0]), _end_box(drawing.boxes, points[-1])]
        for end, node in zip(ends, (edge.source, edge.target), strict=True):
            if end is None or not end.title.startswith(node):
                found.append(f"{name}: does not end at {node}'s box")
        for box in drawing.boxes:
            if box not in ends and any(box.holds(point, INSIDE) for point in points):
                found.append(f"{name}: passes through {box.title}")
    return found


def arrow_ends(svg: str) -> Counter[tuple[str, tuple[float, float]]]:
    """How many forward edges end at each point, by target: two edges into one node that
    share an end point would show as one arrow."""
    return Counter(
        (edge.target, samples(edge.d)[-1]) for edge in read(svg).edges if "back" not in edge.classes
    )
