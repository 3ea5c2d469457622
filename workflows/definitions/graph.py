"""The step graph of a workflow: upstreams, downstreams, roots and sinks, checked for sense."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from workflows.definitions.nodes import Node


@dataclass(frozen=True)
class Graph:
    """Edges between steps, in declaration order; built once per workflow class."""

    nodes: Mapping[str, Node]
    upstream: Mapping[str, tuple[str, ...]]
    downstream: Mapping[str, tuple[str, ...]]

    @classmethod
    def from_nodes(cls, nodes: Mapping[str, Node]) -> Graph:
        """Link each node to its declared upstreams (default: the previously declared node)."""
        upstream: dict[str, tuple[str, ...]] = {}
        previous: str | None = None
        for name, node in nodes.items():
            if node.after is None:
                upstream[name] = (previous,) if previous is not None else ()
            else:
                upstream[name] = tuple(dict.fromkeys(node.after))
            previous = name
        downstream: dict[str, list[str]] = {name: [] for name in nodes}
        for name, ups in upstream.items():
            for up in ups:
                if up in downstream:
                    downstream[up].append(name)
        return cls(
            nodes=dict(nodes),
            upstream=upstream,
            downstream={name: tuple(down) for name, down in downstream.items()},
        )

    @property
    def roots(self) -> tuple[str, ...]:
        return tuple(name for name, ups in self.upstream.items() if not ups)

    @property
    def sinks(self) -> tuple[str, ...]:
        return tuple(name for name, downs in self.downstream.items() if not downs)

    def problems(self) -> dict[str, list[str]]:
        """Return graph-level problems keyed by the step they concern ("" for the whole)."""
        found: dict[str, list[str]] = {}
        if not self.nodes:
            found.setdefault("", []).append("declares no steps")
        for name, ups in self.upstream.items():
            for up in ups:
                if up not in self.nodes:
                    known = ", ".join(self.nodes)
                    found.setdefault(name, []).append(
                        f"unknown upstream {up!r} in after= (steps: {known})"
                    )
                elif up == name:
                    found.setdefault(name, []).append("lists itself in after=")
        cycle = self._cycle()
        if cycle:
            found.setdefault(cycle[0], []).append("is part of a cycle: " + " -> ".join(cycle))
        return found

    def _cycle(self) -> list[str]:
        """Return one cycle as a list of step names (first repeated at the end), or []."""
        state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
        path: list[str] = []

        def visit(name: str) -> list[str]:
            state[name] = 1
            path.append(name)
            for down in self.downstream.get(name, ()):
                if state.get(down) == 1:
                    return [*path[path.index(down) :], down]
                if down not in state and (found := visit(down)):
                    return found
            path.pop()
            state[name] = 2
            return []

        for name in self.nodes:
            if name not in state and (found := visit(name)):
                return found
        return []
