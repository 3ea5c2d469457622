"""Loops inside a run: a ``Loop`` node sends the run back to an earlier step while its
condition holds, and a polling ``Task(repeat_until=...)`` runs again after a durable
sleep until its condition says done.

A loop's *body* is every step on a path from ``back_to`` to the loop node (``back_to``
included, the loop node not). The graph itself stays acyclic: ``back_to`` is not an
edge of it but a jump the engine makes when the loop node is reached and ``while_``
holds (``docs/guide/loops.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workflows.definitions.iterations import iteration_problems
from workflows.definitions.nodes import Condition, Node
from workflows.status import NodeKind


class Loop(Node):
    """Go back to ``back_to`` while ``while_(ctx)`` holds, at most ``max_iterations`` times.

    When the loop node is reached (its upstreams done), ``while_`` is asked: true starts
    a new iteration of the body (every step from ``back_to`` to here is reset to
    pending with the next iteration number, fresh attempts and a new idempotency key)
    and the body runs again from ``back_to``; false completes the loop node, and the
    steps after it go on. When the body has run ``max_iterations`` times and ``while_``
    still holds, ``on_exhausted="fail"`` fails the run with ``max_iterations_exceeded``
    and ``"continue"`` completes the loop node. Its output is ``{"iterations": n,
    "exhausted": bool}``.
    """

    kind = NodeKind.LOOP

    def __init__(
        self,
        *,
        back_to: str,
        while_: Condition,
        max_iterations: int,
        on_exhausted: str = "fail",
        after: Sequence[str] | str | None = None,
        when: Condition | None = None,
    ) -> None:
        super().__init__(after=after, when=when)
        self.back_to = back_to
        self.while_ = while_
        self.max_iterations = max_iterations
        self.on_exhausted = on_exhausted

    def problems(self) -> list[str]:
        found = super().problems()
        if not isinstance(self.back_to, str) or not self.back_to:
            found.append(f"back_to must name a step, got {self.back_to!r}")
        if not callable(self.while_):
            found.append(f"while_= must be callable, got {self.while_!r}")
        return found + iteration_problems(self.max_iterations, self.on_exhausted)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "back_to": self.back_to,
            "max_iterations": self.max_iterations,
            "on_exhausted": self.on_exhausted,
        }
