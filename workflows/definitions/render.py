"""Pictures of a workflow's graph, as Mermaid or Graphviz DOT source.

Pure functions of the definition (no database), so a picture can be drawn for any
registered version, in docs or from ``manage.py workflows_graph``. Each node is labelled
with its step name and kind (an external task with its queue: workers outside the
process do it, ``print_label (external task, queue labels)``). A step with ``when=`` may
be skipped at run time, so its name gets a ``?`` and the edges into it are dashed. A loop
goes back from its loop node to its ``back_to`` step: a dotted edge labelled with its
bound, drawn apart from the graph's own edges (it is a jump the engine makes, not an edge
of the acyclic graph).
"""

from __future__ import annotations

from collections.abc import Callable

from workflows.definitions.limits import DEFAULT_QUEUE
from workflows.definitions.loop import Loop
from workflows.definitions.nodes import Task
from workflows.definitions.workflow import Workflow


def _label(workflow: type[Workflow], name: str) -> str:
    node = workflow.nodes[name]
    mark = "?" if node.when is not None else ""
    if isinstance(node, Task) and node.external:
        return f"{name}{mark} (external {node.kind}, queue {node.queue or DEFAULT_QUEUE})"
    return f"{name}{mark} ({node.kind})"


def _edges(workflow: type[Workflow]) -> list[tuple[str, str, bool]]:
    """Return (upstream, step, step is conditional) for every edge, in declaration order."""
    return [
        (upstream, name, workflow.nodes[name].when is not None)
        for name in workflow.nodes
        for upstream in workflow.graph.upstream[name]
    ]


def _back_edges(workflow: type[Workflow]) -> list[tuple[str, str, str]]:
    """Return (loop node, its back_to, label) for every loop, in declaration order."""
    return [
        (name, node.back_to, f"while, max {node.max_iterations}")
        for name, node in workflow.nodes.items()
        if isinstance(node, Loop)
    ]


def to_mermaid(workflow: type[Workflow]) -> str:
    """Return a Mermaid ``flowchart`` of the workflow's steps, top to bottom.

    Node ids are prefixed (``step_<name>``) because bare words such as ``end`` are
    keywords in Mermaid and would break the chart.
    """
    lines = [f"%% {workflow.name} v{workflow.version}", "flowchart TD"]
    lines += [f'    step_{name}["{_label(workflow, name)}"]' for name in workflow.nodes]
    lines += [
        f"    step_{upstream} {'-.->' if conditional else '-->'} step_{name}"
        for upstream, name, conditional in _edges(workflow)
    ]
    lines += [
        f'    step_{loop} -. "{label}" .-> step_{back_to}'
        for loop, back_to, label in _back_edges(workflow)
    ]
    return "\n".join(lines)


def _dot_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def to_dot(workflow: type[Workflow]) -> str:
    """Return a Graphviz ``digraph`` of the workflow's steps (``dot -Tsvg`` draws it)."""
    lines = [
        f"digraph {_dot_string(f'{workflow.name} v{workflow.version}')} {{",
        "    node [shape=box];",
    ]
    for name, node in workflow.nodes.items():
        label = _dot_string(_label(workflow, name))
        style = ", style=dashed" if node.when is not None else ""
        lines.append(f"    {_dot_string(name)} [label={label}{style}];")
    for upstream, name, conditional in _edges(workflow):
        style = " [style=dashed]" if conditional else ""
        lines.append(f"    {_dot_string(upstream)} -> {_dot_string(name)}{style};")
    for loop, back_to, label in _back_edges(workflow):
        lines.append(
            f"    {_dot_string(loop)} -> {_dot_string(back_to)} "
            f"[style=dotted, constraint=false, label={_dot_string(label)}];"
        )
    lines.append("}")
    return "\n".join(lines)


RENDERERS: dict[str, Callable[[type[Workflow]], str]] = {"mermaid": to_mermaid, "dot": to_dot}
