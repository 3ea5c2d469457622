"""The run page's (and the start page's) picture of a workflow's steps: each step a
box linking to its row in the steps table, coloured by its status, each loop's jump
back drawn beneath the steps.

The table below the picture says the same in text for screen readers and for printing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.utils.html import format_html
from django.utils.safestring import SafeString

from workflows.admin.graph.geometry import Placed
from workflows.admin.graph.layout import STEP_GEOMETRY
from workflows.admin.graph.svg import BackEdge, draw, label

__all__ = ["GraphStep", "graph_steps", "loop_back_edges", "step_graph_svg"]

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
    # The round a loop runs the step in (1: its first, or no loop).
    iteration: int = 1
    # A loop node's: the step it goes back to, and at most how many rounds.
    back_to: str | None = None
    max_iterations: int | None = None
    # An external task's queue (``Task(external=True)``): workers outside the process do it.
    external_queue: str | None = None


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
        queue = entry.get("queue") if entry.get("external") else None
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
                external_queue=str(queue or "default") if entry.get("external") else None,
            )
        )
        previous = name
    return graph


def _step_node(place: Placed[GraphStep]) -> SafeString:
    step = place.step
    mark = "?" if step.conditional else ""
    # "x3" with a multiplication sign: the node's line is short, the tooltip says it in words.
    rounds = f"\N{MULTIPLICATION SIGN}{step.iteration}" if step.iteration > 1 else ""
    # An external task says so where its kind would be; its tooltip names its queue.
    kind = "external" if step.external_queue else step.kind
    second = " · ".join(
        part for part in (kind, step.status.replace("_", " "), step.detail, rounds) if part
    )
    where = f"external {step.kind}, queue {step.external_queue}" if step.external_queue else kind
    tooltip = f"{step.name}{mark} ({where}): {step.status}"
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
