"""What a worker holds while it runs leased work: the fence for its late writes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Any
from uuid import UUID

from workflows.definitions import LeasedNode, Retry, Workflow
from workflows.engine.sql.updates import Fence
from workflows.engine.work_kinds import WorkKind


@dataclass
class Lease:
    """A claimed attempt of a unit of leased work (a step, a fan-out item, a compensation).

    Every write the worker makes for this attempt is fenced by (row id, ``attempt``,
    ``owner``, ``version``): once the lease expired and another worker reclaimed the
    work, those no longer match and the write is rejected with ``LeaseLost``.
    ``max_attempts`` is the unit's budget when it was claimed: a manual retry raises it
    by a whole policy, so attempts 4, 5 and 6 of a three-attempt policy follow the
    policy's backoff again.

    ``renewed_at``: when this process last set the lease to last a whole timeout
    (``time.monotonic()``: at the claim, then at each heartbeat), for the worker's
    watchdog, which fails an attempt that runs past its timeout.
    """

    kind: WorkKind
    unit_id: int
    run_id: UUID
    step_id: int
    step_name: str
    owner: str
    workflow: type[Workflow]
    run_input: dict[str, Any]
    handler_path: str
    # The run's W3C traceparent, which the attempt's span is a child of (workflows.tracing).
    traceparent: str = ""
    attempt: int = 0
    max_attempts: int = 1
    version: int = 0
    item_key: str = ""
    item: Any = None
    compensated_output: Any = None
    generation: int = 0
    # The iteration of the step a loop is running (1 outside loops); for a compensation,
    # the iteration whose work it undoes.
    iteration: int = 1
    # The attempts the step made before its round (0 for items and compensations).
    attempts_before: int = 0
    # Set when a limit lets the unit start only to fail at once (engine.admission).
    refusal: Exception | None = None
    renewed_at: float = field(default_factory=time.monotonic)
    # The handler's ``ctx.set_variables`` patches, in call order: committed with the
    # attempt's outcome (workflows.engine.variables), fenced like it.
    # Not an argument: each lease starts with its own empty list, so a lease made from
    # another by ``dataclasses.replace`` (each item of a batch from the batch's template)
    # never shares the patches of another attempt.
    variable_patches: list[dict[str, Any]] = field(default_factory=list, init=False)
    # The handler's ``ctx.set_tags`` patches, in call order: committed with the attempt's
    # outcome (workflows.engine.tags), fenced like it; its own list, as above.
    tag_patches: list[dict[str, str | None]] = field(default_factory=list, init=False)

    @cached_property
    def node(self) -> LeasedNode:
        """The step's node (looked up once: each transition of the attempt asks)."""
        node = self.workflow.nodes[self.step_name]
        assert isinstance(node, LeasedNode)
        return node

    @property
    def retry(self) -> Retry:
        return self.kind.retry_of(self.node)

    def retry_delay(self) -> timedelta | None:
        """How long to wait before the next attempt, or ``None`` when none is left."""
        return retry_delay(self.retry, self.attempt, self.max_attempts)

    @property
    def idempotency_key(self) -> str:
        """Stable across every attempt of one unit of work; new when its step is rerun
        (``#<generation>``) and in each iteration a loop runs it (``@<iteration>``)."""
        key = f"{self.run_id}/{self.step_name}"
        if self.generation:
            key += f"#{self.generation}"
        if self.iteration > 1:
            key += f"@{self.iteration}"
        if self.item_key:
            key += f"/{self.item_key}"
        return key + self.kind.key_suffix

    @property
    def attempt_in_round(self) -> int:
        """The attempt as every surface and event numbers it: within the step's round
        (``attempt`` counts on across rounds: it is the fence)."""
        return self.attempt - self.attempts_before

    @property
    def label(self) -> str:
        return self.kind.label(self.step_name, self.item_key)

    def writer(self) -> dict[str, Any]:
        """What the event of a run-level write this attempt committed says of it
        (``run.variables_set``, ``run.tags_set``): its step (the event's ``step_id``
        too), attempt, work kind and item."""
        return {
            "step_id": self.step_id,
            "step": self.step_name,
            "attempt": self.attempt_in_round,
            "kind": self.kind.name,
            "item": self.item_key,
        }

    def trace_attributes(self) -> dict[str, str | int]:
        """What the attempt's ``workflow.step`` span says of it (workflows.tracing)."""
        route = self.workflow.route_of(self.step_name)
        attributes: dict[str, str | int] = {
            "flowsite.run.id": str(self.run_id),
            "flowsite.workflow.name": self.workflow.name,
            "flowsite.workflow.version": self.workflow.version,
            "flowsite.step.name": self.step_name,
            "flowsite.step.attempt": self.attempt_in_round,
            "flowsite.work.kind": self.kind.name,
            "flowsite.queue": route.queue,
            "flowsite.worker": self.owner,
        }
        if self.handler_path:
            attributes["code.function.name"] = self.handler_path
        if self.item_key:
            attributes["flowsite.item.key"] = self.item_key
        if self.iteration > 1:
            attributes["flowsite.step.iteration"] = self.iteration
        return attributes

    @property
    def fence(self) -> Fence:
        """What a fenced write expects to find: this attempt's row, version and attempt."""
        return Fence(self.unit_id, self.version, self.attempt)


@dataclass
class LeaseBatch:
    """Several claimed items of one fan-out step, held by one worker (``batch_size``).

    Each lease keeps its own attempt, version and idempotency key; the batch only
    shares transactions: one claimed them all, one records all their outcomes, and a
    heartbeat extends every lease still held. ``leases`` loses the leases a heartbeat
    found lost: those items belong to another worker now and are not run or recorded.
    ``renewed_at``: when the leases were last set to expire a whole timeout from now
    (``time.monotonic()``), so the worker knows when to extend them between handlers.
    """

    leases: list[Lease]
    renewed_at: float = field(default_factory=time.monotonic)

    @property
    def first(self) -> Lease:
        return self.leases[0]

    def holds(self, lease: Lease) -> bool:
        return any(held is lease for held in self.leases)

    def renewal_due(self) -> bool:
        """Extend the leases before the next item: half the lease has passed since the
        last renewal, or :data:`RENEWAL_SLACK`, whichever is shorter.

        Each item's handler is timed alone, from its own start (the worker's watchdog),
        so its lease must last a whole timeout from that start, give or take the
        slack: else the reclaim could take an item that overran for ``lease_expired``
        before the watchdog records it as ``timeout``. A batch of quick items is still
        renewed at most once per slack.
        """
        if not self.leases:
            return False
        timeout = self.first.node.effective_timeout.total_seconds()
        return time.monotonic() - self.renewed_at > min(timeout / 2, RENEWAL_SLACK)


# How long a batch's leases may go unrenewed before an item starts (seconds): less than
# the reclaim's grace (``workflows.engine.recovery.RECLAIM_GRACE``).
RENEWAL_SLACK = 1.0

# What a worker holds after a claim: one unit of work, or a batch of fan-out items.
Held = Lease | LeaseBatch


def retry_delay(retry: Retry, attempt: int, max_attempts: int) -> timedelta | None:
    """The backoff after ``attempt`` failed, counted within the current set of attempts.

    ``max_attempts`` is the unit's budget: the policy's own at first, raised by a whole
    policy at each manual retry; the set's first attempt is ``max_attempts - policy + 1``.
    """
    if attempt >= max_attempts:
        return None
    position = attempt - (max_attempts - retry.max_attempts)
    return retry.delay_after(max(position, 1))
