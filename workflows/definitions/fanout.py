"""``FanOut``: run a handler (or a child workflow) once per item, a few at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from workflows.definitions.nodes import Handler, LeasedNode, LeasedOptions
from workflows.status import NodeKind

if TYPE_CHECKING:
    from workflows.context import Context


class FanOut(LeasedNode):
    """One leased, retried unit per item, at most ``max_parallel`` in hand at once.

    ``items(ctx)`` is computed once when the step starts; ``key(item)`` names each item
    (default: its position) and must be unique. With ``workflow=`` each item starts a
    child run instead (input: the item when it is a JSON object, else
    ``{"item": item}``). The step completes when every item is final and failures are
    within tolerance (output: the item outputs in item order), and fails as soon as
    failures exceed ``tolerated_failures`` (a count) or ``tolerated_failure_ratio`` (a
    share of all items); with neither, no failure is tolerated.

    ``batch_size=N`` (opt-in; default 1) lets a worker claim up to N ready items in one
    transaction, run their handlers one after another, and record all their outcomes in
    one transaction: each item keeps its own attempt, lease, retries and idempotency key,
    only the transactions are shared. A batch never holds more than ``max_parallel``
    items, so ``batch_size`` may not exceed it.
    """

    kind = NodeKind.FANOUT

    def __init__(
        self,
        handler: str | Handler | None = None,
        *,
        items: Callable[[Context], Sequence[Any]],
        key: Callable[[Any], str] | None = None,
        workflow: str | None = None,
        max_parallel: int = 10,
        tolerated_failures: int | None = None,
        tolerated_failure_ratio: float | None = None,
        batch_size: int = 1,
        **options: Unpack[LeasedOptions],
    ) -> None:
        super().__init__(handler, **options)
        self.items = items
        self.key = key
        self.workflow = workflow
        self.max_parallel = max_parallel
        self.tolerated_failures = tolerated_failures
        self.tolerated_failure_ratio = tolerated_failure_ratio
        self.batch_size = batch_size

    def allowed_failures(self, total: int) -> int:
        """How many items may fail before the step fails."""
        limits = []
        if self.tolerated_failures is not None:
            limits.append(self.tolerated_failures)
        if self.tolerated_failure_ratio is not None:
            limits.append(int(self.tolerated_failure_ratio * total))
        return min(limits) if limits else 0

    def child_input(self, item: Any) -> dict[str, Any]:
        return item if isinstance(item, dict) else {"item": item}

    def problems(self) -> list[str]:
        found = super().problems()
        if (self.handler is None) == (self.workflow is None):
            found.append("FanOut needs exactly one of a handler or workflow=")
        if self.workflow is not None and self.compensate is not None:
            found.append(
                "compensate= applies to handler items; a child workflow compensates itself"
            )
        if self.workflow is not None and self.transactional is True:
            found.append(
                "transactional= applies to handler items; a child workflow's own tasks declare it"
            )
        if not callable(self.items):
            found.append(f"items= must be callable, got {self.items!r}")
        if self.key is not None and not callable(self.key):
            found.append(f"key= must be callable, got {self.key!r}")
        if not isinstance(self.max_parallel, int) or self.max_parallel < 1:
            found.append(f"max_parallel must be an integer >= 1, got {self.max_parallel!r}")
        found.extend(self._batch_problems())
        if self.tolerated_failures is not None and (
            not isinstance(self.tolerated_failures, int) or self.tolerated_failures < 0
        ):
            found.append(
                f"tolerated_failures must be an integer >= 0, got {self.tolerated_failures!r}"
            )
        if self.tolerated_failure_ratio is not None and not (
            isinstance(self.tolerated_failure_ratio, int | float)
            and 0 <= self.tolerated_failure_ratio <= 1
        ):
            found.append(
                "tolerated_failure_ratio must be between 0 and 1, "
                f"got {self.tolerated_failure_ratio!r}"
            )
        return found

    def _batch_problems(self) -> list[str]:
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            return [f"batch_size must be an integer >= 1, got {self.batch_size!r}"]
        if self.batch_size < 1:
            return [f"batch_size must be an integer >= 1, got {self.batch_size!r}"]
        if self.batch_size == 1:
            return []
        found = []
        if self.workflow is not None:
            found.append("batch_size= applies to handler items; child runs are not batched")
        if self.concurrency_key is not None or self.rate_limit is not None:
            found.append(
                "batch_size= cannot be combined with concurrency_key= or rate_limit=: "
                "each item is admitted by its own claim under a limit"
            )
        if self.transactional is True:
            found.append(
                "batch_size= cannot be combined with transactional=True: a transactional "
                "item's handler runs inside its own completion's transaction, and a batch "
                "would hold that transaction (on SQLite the database's write lock) across "
                "every handler of the batch"
            )
        if isinstance(self.max_parallel, int) and self.batch_size > self.max_parallel:
            found.append(
                f"batch_size ({self.batch_size}) must not exceed max_parallel "
                f"({self.max_parallel}): a batch is made of items in hand"
            )
        return found

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "workflow": self.workflow,
            "max_parallel": self.max_parallel,
            "tolerated_failures": self.tolerated_failures,
            "tolerated_failure_ratio": self.tolerated_failure_ratio,
            "batch_size": self.batch_size,
        }
