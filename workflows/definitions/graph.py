"""The step graph of a workflow: upstreams, downstreams, roots and sinks, checked for sense."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from workflows.definitions.loop import Loop
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
        elif not found:
            for name, message in self._loop_problems():
                found.setdefault(name, []).append(message)
        return found

    # -- loops ----------------------------------------------------------------------------

    @cached_property
    def loop_bodies(self) -> dict[str, tuple[str, ...]]:
        """Each loop node's body: the steps on a path from its ``back_to`` to it
        (``back_to`` included), in declaration order. Empty for a loop whose ``back_to``
        is not upstream of it (a definition problem)."""
        bodies = {}
        for name, node in self.nodes.items():
            if isinstance(node, Loop):
                before = self.ancestors(name)
                after = {node.back_to, *self.descendants(node.back_to)}
                bodies[name] = tuple(step for step in self.nodes if step in before & after)
        return bodies

    def loops_around(self, step: str) -> tuple[str, ...]:
        """The loop nodes whose body holds ``step``, innermost first."""
        around = [loop for loop, body in self.loop_bodies.items() if step in body]
        return tuple(sorted(around, key=lambda loop: len(self.loop_bodies[loop])))

    def ancestors(self, name: str) -> set[str]:
        """Every step upstream of ``name``, however far."""
        return self._reach(name, self.upstream)

    def descendants(self, name: str) -> set[str]:
        """Every step downstream of ``name``, however far."""
        return self._reach(name, self.downstream)

    @staticmethod
    def _reach(name: str, edges: Mapping[str, tuple[str, ...]]) -> set[str]:
        seen: set[str] = set()
        stack = list(edges.get(name, ()))
        while stack:
            step = stack.pop()
            if step not in seen:
                seen.add(step)
                stack.extend(edges.get(step, ()))
        return seen

    def _loop_problems(self) -> list[tuple[str, str]]:
        """Each loop's ``back_to`` must be upstream of it; two loops' bodies are apart, or
        one holds the other whole (its loop node included)."""
        found = []
        loops = {name: node for name, node in self.nodes.items() if isinstance(node, Loop)}
        for name, node in loops.items():
            if node.back_to == name:
                found.append((name, "back_to names the loop itself; name a step before it"))
            elif node.back_to not in self.nodes:
                known = ", ".join(self.nodes)
                found.append((name, f"back_to {node.back_to!r} is not a step (steps: {known})"))
            elif node.back_to not in self.ancestors(name):
                found.append(
                    (
                        name,
                        f"back_to {node.back_to!r} is not upstream of the loop: a loop goes "
                        "back to a step that leads to it",
                    )
                )
        if found:
            return found
        spans = {name: {*self.loop_bodies[name], name} for name in loops}
        names = list(loops)
        for index, outer in enumerate(names):
            for inner in names[index + 1 :]:
                first, second = spans[outer], spans[inner]
                if first & second and not (first < second or second < first):
                    found.append(
                        (
                            inner,
                            f"its body crosses the boundary of loop {outer!r}: loops may "
                            "nest only when one body holds the other whole, loop node "
                            "included",
                        )
                    )
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
