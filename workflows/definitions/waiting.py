"""Steps that wait on the outside world: external signals and child workflows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from workflows.definitions.nodes import Condition, Node, timeout_problems
from workflows.status import NodeKind
from workflows.tags import patch_problem

if TYPE_CHECKING:
    from workflows.context import Context


class WaitForSignal(Node):
    """Wait until the run receives the signal ``name``; its payload is the step's output.

    A signal sent before the step starts is kept and consumed when the step starts.
    Without a signal within ``timeout`` the step times out and the run fails.
    """

    kind = NodeKind.SIGNAL

    def __init__(
        self,
        name: str,
        *,
        timeout: timedelta | None = None,
        after: Sequence[str] | str | None = None,
        when: Condition | None = None,
    ) -> None:
        super().__init__(after=after, when=when)
        self.signal = name
        self.timeout = timeout

    def problems(self) -> list[str]:
        found = super().problems()
        if not isinstance(self.signal, str) or not self.signal:
            found.append(f"WaitForSignal needs a signal name, got {self.signal!r}")
        found.extend(timeout_problems(self.timeout))
        return found

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "signal": self.signal,
            "timeout": self.timeout.total_seconds() if self.timeout else None,
        }


class SubWorkflow(Node):
    """Start a child run of ``workflow`` and complete or fail with it.

    ``input(ctx)`` builds the child's input (default: the parent's input). ``tags``: the
    child's own tags, a dict or ``tags(ctx)`` returning one (default: the parent run's
    tags, as they are when the child starts); a bad tag fails the step (``child_error``).
    Cancelling the parent cancels the child.
    """

    kind = NodeKind.SUBWORKFLOW

    def __init__(
        self,
        workflow: str,
        *,
        input: Callable[[Context], dict[str, Any]] | None = None,
        after: Sequence[str] | str | None = None,
        when: Condition | None = None,
        tags: dict[str, str] | Callable[[Context], dict[str, str]] | None = None,
    ) -> None:
        super().__init__(after=after, when=when)
        self.workflow = workflow
        self.input = input
        self.tags = tags

    def problems(self) -> list[str]:
        found = super().problems()
        if not isinstance(self.workflow, str) or not self.workflow:
            found.append(f"SubWorkflow needs a workflow name, got {self.workflow!r}")
        if self.input is not None and not callable(self.input):
            found.append(f"input= must be callable, got {self.input!r}")
        if self.tags is not None and not callable(self.tags):
            refused = patch_problem(self.tags, removals=False)
            if refused is not None:
                found.append(f"tags= {refused[0]}")
        return found

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "workflow": self.workflow}
