"""What a worker holds while it runs leased work: the fence for its late writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import models

from workflows.definitions import LeasedNode, Retry, Workflow
from workflows.definitions.nodes import default_retry
from workflows.models import CompensationRecord, FanOutItem, Step


@dataclass
class Lease:
    """A claimed attempt of a step, of a fan-out item, or of a compensation.

    Every write the worker makes for this attempt is fenced by (row id, ``attempt``,
    ``owner``, ``version``): once the lease expired and another worker reclaimed the
    work, those no longer match and the write is rejected with ``LeaseLost``.
    """

    step_id: int
    run_id: UUID
    step_name: str
    attempt: int
    owner: str
    version: int
    workflow: type[Workflow]
    run_input: dict[str, Any]
    item_id: int | None = None
    item_key: str = ""
    item: Any = None
    compensation_id: int | None = None
    compensation_handler: str = ""
    compensated_output: Any = None

    @property
    def kind(self) -> str:
        if self.compensation_id is not None:
            return "compensation"
        return "item" if self.item_id is not None else "step"

    @property
    def model(self) -> type[models.Model]:
        return {"step": Step, "item": FanOutItem, "compensation": CompensationRecord}[self.kind]

    @property
    def unit_id(self) -> int:
        """The id of the leased row (the step, the item or the compensation record)."""
        return {"step": self.step_id, "item": self.item_id, "compensation": self.compensation_id}[
            self.kind
        ]

    @property
    def node(self) -> LeasedNode:
        node = self.workflow.nodes[self.step_name]
        assert isinstance(node, LeasedNode)
        return node

    @property
    def retry(self) -> Retry:
        """The forward work retries per its node; a compensation per the project default
        (undoing must not give up as fast as a forward step may be told to)."""
        return default_retry() if self.kind == "compensation" else self.node.effective_retry

    @property
    def idempotency_key(self) -> str:
        """Stable across every attempt of one unit of work."""
        key = f"{self.run_id}/{self.step_name}"
        if self.item_id is not None:
            key += f"/{self.item_key}"
        if self.compensation_id is not None:
            key += "/compensate"
        return key

    @property
    def label(self) -> str:
        names = {
            "step": "step",
            "item": f"item {self.item_key!r} of step",
            "compensation": "compensation of step",
        }
        return f"{names[self.kind]} {self.step_name!r}"
