"""A graph as inline SVG, laid out on the server: the run page's picture of its steps,
and the flow page's of its members.

Drawn here rather than in the browser so the admin needs no script and nothing from a
CDN, and a host's content security policy has nothing to allow. The layout is the
simple layered one: each node's column is the longest path from a root to it (so every
edge points right), and within a column nodes follow their upstreams' rows (one
barycentre pass) to keep edges short and crossings few. Graphs of workflows are small
(tens of steps) and the flow page draws a bounded number of members, so the quadratic
bits do not matter.

:func:`draw` lays out and draws any nodes that have a ``name`` and the names they come
``after``; what a node shows is its caller's (:func:`step_graph_svg` here, the flow
page's members in :mod:`workflows.admin.flow_graph`). Colours are CSS classes
(``wf-node st-<status>``) styled by ``workflows/console.css``, so a host theme can
restyle them; the table below each picture says the same in text for screen readers and
for printing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

__all__ = [
    "STEP_GEOMETRY",
    "BackEdge",
    "Geometry",
    "GraphStep",
    "Placed",
    "draw",
    "graph_steps",
    "label",
    "layout",
    "loop_back_edges",
    "step_graph_svg",
]

# Characters of a step name that fit in a node at the admin's font size; the full name
# is the node's tooltip.
LABEL_CHARS = 18


class Vertex(Protocol):
    """What the layout needs of a node: its name and its upstreams' names."""

    @property
    def name(self) -> str: ...

    @property
    def after(self) -> tuple[str, ...]: ...


V = TypeVar("V", bound=Vertex)


@dataclass(frozen=True)
class Geometry:
    """The size of a node and of the gaps between nodes, in pixels."""

    node_width: int = 150
    node_height: int = 54
    column_gap: int = 44
    row_gap: int = 18
    margin: int = 8


STEP_GEOMETRY = Geometry()


@dataclass(frozen=True)
class GraphStep:
    """One node: its name, upstream names, kind, whether a condition may skip it, and
    what the run's step row says (status and a short detail such as fan-out counts)."""

    name: str
    after: tuple[str, ...]
    kind: str
    conditional: bool
    status: str = "pending"
    detail: str = ""
    # The round a loop runs the step in (1: its first, or no loop).
    iteration: int = 1
    # A loop node's: the step it goes back to, and at most how many rounds.
    back_to: str | None = None
    max_iterations: int | None = None


@dataclass(frozen=True)
class Placed(Generic[V]):
    """A node (a step, or a flow's member) at its place: column (layer), row within the
    column, pixel origin."""

    step: V
    column: int
    row: int
    x: int
    y: int


def graph_steps(
    snapshot: Mapping[str, object] | None,
    states: Mapping[str, tuple[str, str]],
    iterations: Mapping[str, int] | None = None,
) -> list[GraphStep]:
    """The run's graph as its snapshot recorded it, with ``states`` (name → (status,
    detail)) and ``iterations`` (name → the round a loop runs it in) laid over it.

    The snapshot is the graph the run was started with, so the picture is right even
    after a deploy changed or dropped the definition. A snapshot step without ``after``
    follows the step declared before it, as the definition's default does.
    """
    steps = (snapshot or {}).get("steps") or []
    graph: list[GraphStep] = []
    previous: str | None = None
    for entry in steps if isinstance(steps, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        name = entry["name"]
        after = entry.get("after")
        upstream = tuple(after) if isinstance(after, list) else ((previous,) if previous else ())
        status, detail = states.get(name, ("pending", ""))
        back_to, rounds = entry.get("back_to"), entry.get("max_iterations")
        graph.append(
            GraphStep(
                name=name,
                after=upstream,
                kind=str(entry.get("kind", "")),
                conditional=bool(entry.get("has_condition")),
                status=status,
                detail=detail,
                iteration=(iterations or {}).get(name, 1),
                back_to=back_to if isinstance(back_to, str) else None,
                max_iterations=rounds if isinstance(rounds, int) else None,
            )
        )
        previous = name
    return graph


def _columns(nodes: Sequence[V]) -> dict[str, int]:
    """Each node's column: the length of the longest path from a root to it.

    Walked with a stack of its own rather than by recursion, so a long chain (a flow
    of hundreds of members one after another) cannot exhaust Python's stack. An
    upstream that names no node, or that would close a cycle, is not followed.
    """
    by_name = {node.name: node for node in nodes}
    column: dict[str, int] = {}
    for root in nodes:
        stack, path = [root.name], set()
        while stack:
            name = stack[-1]
            if name in column:
                stack.pop()
            elif name not in path:  # first visit: its upstreams go first
                path.add(name)
                stack.extend(
                    up
                    for up in by_name[name].after
                    if up in by_name and up not in column and up not in path
                )
            else:  # its upstreams are placed
                stack.pop()
                path.remove(name)
                ups = [column[up] for up in by_name[name].after if up in column]
                column[name] = 1 + max(ups, default=-1)
    return column


def layout(nodes: Sequence[V], geometry: Geometry = STEP_GEOMETRY) -> list[Placed[V]]:
    """Place each node: column by longest path from a root, rows by upstream barycentre."""
    column = _columns(nodes)
    columns: dict[int, list[V]] = {}
    for node in nodes:
        columns.setdefault(column[node.name], []).append(node)
    row: dict[str, float] = {}
    for index in sorted(columns):
        members = columns[index]
        declared = {node.name: position for position, node in enumerate(members)}

        def barycentre(node: V, declared: dict[str, int] = declared) -> tuple[float, int]:
            ups = [row[up] for up in node.after if up in row]
            return (sum(ups) / len(ups) if ups else declared[node.name], declared[node.name])

        for position, node in enumerate(sorted(members, key=barycentre)):
            row[node.name] = position
    tallest = max((len(members) for members in columns.values()), default=0)
    step_x = geometry.node_width + geometry.column_gap
    step_y = geometry.node_height + geometry.row_gap
    placed = []
    for node in nodes:
        height = len(columns[column[node.name]])
        # Centre short columns against the tallest, so a join sits between its branches.
        offset = (tallest - height) * step_y / 2
        placed.append(
            Placed(
                step=node,
                column=column[node.name],
                row=int(row[node.name]),
                x=geometry.margin + column[node.name] * step_x,
                y=int(geometry.margin + offset + row[node.name] * step_y),
            )
        )
    return placed


def label(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _edge(source: Placed[V], target: Placed[V], geometry: Geometry, classes: str) -> SafeString:
    """A curve from the source's right side to the target's left side.

    An edge that skips columns runs straight along the source's row to the column
    before the target and bends only there, so it does not cut through (or hide
    behind) the nodes of the columns in between, which sit at other rows.
    """
    x1, y1 = source.x + geometry.node_width, source.y + geometry.node_height // 2
    x2, y2 = target.x - 3, target.y + geometry.node_height // 2
    straight = x1 if target.column - source.column <= 1 else x2 - geometry.column_gap
    bend = (x2 - straight) / 2
    return format_html(
        '<path class="wf-edge{}" d="M{} {} L{} {} C{} {} {} {} {} {}" '
        'marker-end="url(#wf-arrow)"/>',
        classes,
        x1,
        y1,
        straight,
        y1,
        straight + bend,
        y1,
        x2 - bend,
        y2,
        x2,
        y2,
    )


@dataclass(frozen=True)
class BackEdge:
    """A jump against the graph's direction (a loop going back to an earlier step),
    drawn below the nodes from ``source`` to ``target`` with ``text`` under it."""

    source: str
    target: str
    text: str


# How far below the nodes the first back edge runs (room for its arrow going up), and
# the vertical room each back edge takes there: its line and its label.
BACK_EDGE_DROP = 24
BACK_EDGE_ROOM = 34


def _back_edge(
    edge: BackEdge, source: Placed[V], target: Placed[V], depth: int, geometry: Geometry
) -> SafeString:
    """A dashed line from the bottom of ``source`` down to ``depth``, along it leftwards
    and up into the bottom of ``target``, rounded at the corners, its label beneath.

    Below every node, so it crosses none of the steps it skips back over."""
    bend = 8
    x1 = source.x + geometry.node_width // 2
    x2 = target.x + geometry.node_width // 2
    y1 = source.y + geometry.node_height
    y2 = target.y + geometry.node_height + 3
    return format_html(
        '<g class="wf-back-edge"><title>{}</title>'
        '<path class="wf-edge back" d="M{} {} L{} {} Q{} {} {} {} L{} {} Q{} {} {} {} L{} {}" '
        'marker-end="url(#wf-arrow)"/>'
        '<text x="{}" y="{}" class="back-label" text-anchor="middle">{}</text></g>',
        f"{edge.source} goes back to {edge.target}: {edge.text}",
        x1,
        y1,
        x1,
        depth - bend,
        x1,
        depth,
        x1 - bend,
        depth,
        x2 + bend,
        depth,
        x2,
        depth,
        x2,
        depth - bend,
        x2,
        y2,
        (x1 + x2) // 2,
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
    placed = layout(nodes, geometry)
    if not placed:
        return SafeString("")
    by_name = {place.step.name: place for place in placed}
    width = max(place.x for place in placed) + geometry.node_width + geometry.margin
    bottom = max(place.y for place in placed) + geometry.node_height
    drawable = [e for e in back_edges if e.source in by_name and e.target in by_name]
    backs = format_html_join(
        "",
        "{}",
        (
            (
                _back_edge(
                    edge,
                    by_name[edge.source],
                    by_name[edge.target],
                    bottom + BACK_EDGE_DROP + index * BACK_EDGE_ROOM,
                    geometry,
                ),
            )
            for index, edge in enumerate(drawable)
        ),
    )
    height = bottom + (len(drawable) * BACK_EDGE_ROOM + 14 if drawable else 0) + geometry.margin
    edges = format_html_join(
        "",
        "{}",
        (
            (_edge(by_name[up], place, geometry, edge_classes(by_name[up].step, place.step)),)
            for place in placed
            for up in place.step.after
            if up in by_name
        ),
    )
    drawn = format_html_join("", "{}", ((node(place),) for place in placed))
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
        backs,
        drawn,
    )


def _step_node(place: Placed[GraphStep]) -> SafeString:
    step = place.step
    mark = "?" if step.conditional else ""
    # "x3" with a multiplication sign: the node's line is short, the tooltip says it in words.
    rounds = f"\N{MULTIPLICATION SIGN}{step.iteration}" if step.iteration > 1 else ""
    second = " · ".join(
        part for part in (step.kind, step.status.replace("_", " "), step.detail, rounds) if part
    )
    tooltip = f"{step.name}{mark} ({step.kind}): {step.status}"
    if step.detail:
        tooltip += f", {step.detail}"
    if rounds:
        tooltip += f", round {step.iteration}"
    return format_html(
        '<a href="#step-{}" class="wf-node st-{}"><title>{}</title>'
        '<rect x="{}" y="{}" width="{}" height="{}" rx="6"/>'
        '<text x="{}" y="{}" class="name">{}</text>'
        '<text x="{}" y="{}" class="state">{}</text></a>',
        step.name,
        step.status,
        tooltip,
        place.x,
        place.y,
        STEP_GEOMETRY.node_width,
        STEP_GEOMETRY.node_height,
        place.x + 10,
        place.y + 22,
        label(step.name + mark, LABEL_CHARS),
        place.x + 10,
        place.y + 41,
        label(second, LABEL_CHARS + 8),
    )


def _conditional(upstream: GraphStep, step: GraphStep) -> str:
    """A dashed edge leads to a step with a condition."""
    return " conditional" if step.conditional else ""


def loop_back_edges(steps: Sequence[GraphStep]) -> list[BackEdge]:
    """Each loop node's jump back to its ``back_to``, labelled with its bound."""
    return [
        BackEdge(
            source=step.name,
            target=step.back_to,
            text=f"↻ while its condition holds, max {step.max_iterations}"
            if step.max_iterations
            else "↻ while its condition holds",
        )
        for step in steps
        if step.back_to
    ]


def step_graph_svg(steps: Sequence[GraphStep], *, title: str) -> SafeString:
    """The SVG element for ``steps``: an image with a title, nodes linking to their rows,
    each loop's back edge beneath them."""
    return draw(
        steps,
        title=title,
        node=_step_node,
        edge_classes=_conditional,
        back_edges=loop_back_edges(steps),
    )
