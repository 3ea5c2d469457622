"""What a worker holds while it runs a step: the fence for its late writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from workflows.definitions import Task, Workflow


@dataclass
class Lease:
    """A claimed attempt of a step.

    Every write the worker makes for this attempt is fenced by (step id, ``attempt``,
    ``owner``, ``version``): once the lease expired and another worker reclaimed the
    step, those no longer match and the write is rejected with ``LeaseLost``.
    """

    step_id: int
    run_id: UUID
    step_name: str
    attempt: int
    owner: str
    version: int
    workflow: type[Workflow]
    run_input: dict[str, Any]

    @property
    def node(self) -> Task:
        node = self.workflow.nodes[self.step_name]
        assert isinstance(node, Task)
        return node
