"""A run's step graph as inline SVG, laid out on the server: the run page's picture.

Drawn here rather than in the browser so the admin needs no script and nothing from a
CDN, and a host's content security policy has nothing to allow. The layout is the
simple layered one: each step's column is the longest path from a root to it (so every
edge points right), and within a column steps follow their upstreams' rows (one
barycentre pass) to keep edges short and crossings few. Graphs of workflows are small
(tens of steps), so the quadratic bits do not matter.

Colours are CSS classes (``wf-node st-<status>``) styled by ``workflows/console.css``,
so a host theme can restyle them; the step table below the picture says the same in
text for screen readers and for printing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

__all__ = ["GraphStep", "Placed", "graph_steps", "layout", "step_graph_svg"]

NODE_WIDTH = 150
NODE_HEIGHT = 54
COLUMN_GAP = 44
ROW_GAP = 18
MARGIN = 8
# Characters of a step name that fit in a node at the admin's font size; the full name
# is the node's tooltip.
LABEL_CHARS = 18


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


@dataclass(frozen=True)
class Placed:
    """A step at its place: column (layer), row within the column, pixel origin."""

    step: GraphStep
    column: int
    row: int
    x: int
    y: int


def graph_steps(
    snapshot: Mapping[str, object] | None,
    states: Mapping[str, tuple[str, str]],
) -> list[GraphStep]:
    """The run's graph as its snapshot recorded it, with ``states`` (name → (status,
    detail)) laid over it.

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
        graph.append(
            GraphStep(
                name=name,
                after=upstream,
                kind=str(entry.get("kind", "")),
                conditional=bool(entry.get("has_condition")),
                status=status,
                detail=detail,
            )
        )
        previous = name
    return graph


def layout(steps: Sequence[GraphStep]) -> list[Placed]:
    """Place each step: column by longest path from a root, rows by upstream barycentre."""
    known = {step.name for step in steps}
    column: dict[str, int] = {}

    def depth(step: GraphStep, seen: frozenset[str] = frozenset()) -> int:
        if step.name not in column:
            ups = [by_name[up] for up in step.after if up in known and up not in seen]
            inner = seen | {step.name}
            column[step.name] = 1 + max((depth(up, inner) for up in ups), default=-1)
        return column[step.name]

    by_name = {step.name: step for step in steps}
    for step in steps:
        depth(step)
    columns: dict[int, list[GraphStep]] = {}
    for step in steps:
        columns.setdefault(column[step.name], []).append(step)
    row: dict[str, float] = {}
    for index in sorted(columns):
        members = columns[index]
        declared = {step.name: position for position, step in enumerate(members)}

        def barycentre(step: GraphStep, declared: dict[str, int] = declared) -> tuple[float, int]:
            ups = [row[up] for up in step.after if up in row]
            return (sum(ups) / len(ups) if ups else declared[step.name], declared[step.name])

        for position, step in enumerate(sorted(members, key=barycentre)):
            row[step.name] = position
    tallest = max((len(members) for members in columns.values()), default=0)
    placed = []
    for step in steps:
        height = len(columns[column[step.name]])
        # Centre short columns against the tallest, so a join sits between its branches.
        offset = (tallest - height) * (NODE_HEIGHT + ROW_GAP) / 2
        placed.append(
            Placed(
                step=step,
                column=column[step.name],
                row=int(row[step.name]),
                x=MARGIN + column[step.name] * (NODE_WIDTH + COLUMN_GAP),
                y=int(MARGIN + offset + row[step.name] * (NODE_HEIGHT + ROW_GAP)),
            )
        )
    return placed


def _label(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _edge(source: Placed, target: Placed) -> SafeString:
    """A curve from the source's right side to the target's left side.

    An edge that skips columns runs straight along the source's row to the column
    before the target and bends only there, so it does not cut through (or hide
    behind) the nodes of the columns in between, which sit at other rows.
    """
    x1, y1 = source.x + NODE_WIDTH, source.y + NODE_HEIGHT // 2
    x2, y2 = target.x - 3, target.y + NODE_HEIGHT // 2
    straight = x1 if target.column - source.column <= 1 else x2 - COLUMN_GAP
    bend = (x2 - straight) / 2
    dashed = " conditional" if target.step.conditional else ""
    return format_html(
        '<path class="wf-edge{}" d="M{} {} L{} {} C{} {} {} {} {} {}" '
        'marker-end="url(#wf-arrow)"/>',
        dashed,
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


def _node(place: Placed) -> SafeString:
    step = place.step
    mark = "?" if step.conditional else ""
    second = " · ".join(
        part for part in (step.kind, step.status.replace("_", " "), step.detail) if part
    )
    tooltip = f"{step.name}{mark} ({step.kind}): {step.status}"
    if step.detail:
        tooltip += f", {step.detail}"
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
        NODE_WIDTH,
        NODE_HEIGHT,
        place.x + 10,
        place.y + 22,
        _label(step.name + mark, LABEL_CHARS),
        place.x + 10,
        place.y + 41,
        _label(second, LABEL_CHARS + 8),
    )


def step_graph_svg(steps: Sequence[GraphStep], *, title: str) -> SafeString:
    """The SVG element for ``steps``: an image with a title, nodes linking to their rows."""
    placed = layout(steps)
    if not placed:
        return SafeString("")
    by_name = {place.step.name: place for place in placed}
    width = max(place.x for place in placed) + NODE_WIDTH + MARGIN
    height = max(place.y for place in placed) + NODE_HEIGHT + MARGIN
    edges = format_html_join(
        "",
        "{}",
        (
            (_edge(by_name[up], place),)
            for place in placed
            for up in place.step.after
            if up in by_name
        ),
    )
    nodes = format_html_join("", "{}", ((_node(place),) for place in placed))
    return format_html(
        '<svg class="wf-graph" xmlns="http://www.w3.org/2000/svg" role="img" '
        'aria-labelledby="wf-graph-title" width="{}" height="{}" viewBox="0 0 {} {}">'
        '<title id="wf-graph-title">{}</title>'
        '<defs><marker id="wf-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0 0 L10 5 L0 10 z" class="wf-arrow"/></marker></defs>'
        "{}{}</svg>",
        width,
        height,
        width,
        height,
        title,
        edges,
        nodes,
    )
