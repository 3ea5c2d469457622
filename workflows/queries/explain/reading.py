"""What the reads of one explanation returned, as the holds look things up:
:class:`Reading` (indexed by step, timer and item), :class:`Unit` (a step, item or
compensation as far as leases and dispatch go), and the run's registered definition."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workflows.definitions import LeasedNode, Workflow, registry
from workflows.definitions.limits import Route
from workflows.engine.work_kinds import WorkKind
from workflows.errors import DefinitionMissing
from workflows.models import Run
from workflows.status import StepStatus, TimerKind, attempt_in_round

__all__ = ["UNIT_FIELDS", "Reading", "Unit", "registered", "unit_of"]

# The columns of a step, item or compensation that make its :class:`Unit`.
UNIT_FIELDS = (
    "status",
    "attempt",
    "max_attempts",
    "lease_owner",
    "lease_expires_at",
    "updated_at",
    "queue",
    "requires",
    "held_on",
)


@dataclass(frozen=True)
class Unit:
    """A step, item or compensation as far as leases and dispatch are concerned."""

    kind: WorkKind
    step_id: int
    item: str | None
    status: str
    attempt: int
    max_attempts: int
    lease_owner: str
    lease_expires_at: datetime | None
    updated_at: datetime
    queue: str
    requires: str
    held_on: str
    lease_expired: bool
    undispatched: bool

    @property
    def holds_lease(self) -> bool:
        """A worker runs it (a fan-out step is ``running`` without a lease)."""
        return self.status == StepStatus.RUNNING and self.lease_expires_at is not None

    @property
    def route(self) -> Route:
        return Route.of_row(self.queue, self.requires)


class Reading:
    """What the queries returned, indexed the ways the entries look things up."""

    def __init__(
        self,
        run: Run,
        steps: list[dict[str, Any]],
        timers: list[dict[str, Any]],
        item_counts: dict[tuple[int, str], int],
    ) -> None:
        self.step_names = {step["id"]: step["name"] for step in steps}
        self.item_counts = item_counts
        self.timeouts = {
            (timer["step_id"], timer["kind"]): timer["due_at"]
            for timer in timers
            if timer["kind"] != TimerKind.RETRY
        }
        self.releases = {
            (timer["step_id"], timer["item__key"]): timer["due_at"]
            for timer in timers
            if timer["kind"] == TimerKind.RELEASE
        }
        self.workflow = registered(run)
        self.snapshot_steps = {
            step.get("name"): step for step in (run.snapshot or {}).get("steps", [])
        }
        # Filled by explain() when it read them: what live workers serve (None: not
        # read, the work does not go to workers), and held slots per concurrency key.
        self.workers: list[tuple[frozenset[str], frozenset[str]]] | None = None
        self.held_slots: dict[str, int] = {}
        # Filled by explain(): since when a cancelling run asks its running work to stop.
        self.cancel_requested_at: datetime | None = None

    def served(self, route: Route) -> bool:
        """Whether a live worker serves ``route`` (or workers were not asked about)."""
        return self.workers is None or any(
            route.served_by(queues, capabilities) for queues, capabilities in self.workers
        )

    def node(self, step_id: int) -> LeasedNode | None:
        workflow, name = self.workflow, self.step_names.get(step_id)
        node = workflow.nodes.get(name) if workflow is not None and name else None
        return node if isinstance(node, LeasedNode) else None

    def described(self, name: str) -> Mapping[str, Any]:
        """The step's node as the run's registered definition describes it, else as the
        run's snapshot recorded it, else nothing known."""
        if self.workflow is not None and name in self.workflow.nodes:
            return self.workflow.nodes[name].describe()
        return self.snapshot_steps.get(name, {})


def registered(run: Run) -> type[Workflow] | None:
    try:
        return registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing:
        return None


def unit_of(kind: WorkKind, row: dict[str, Any], *, item: str | None) -> Unit:
    values = {name: row[name] for name in (*UNIT_FIELDS, "lease_expired", "undispatched")}
    # A step's attempts numbered within its round, as every surface shows them (items
    # and compensations have no rounds).
    values["attempt"], values["max_attempts"] = attempt_in_round(
        row["attempt"], row["max_attempts"], row.get("round_attempts_before", 0)
    )
    return Unit(kind=kind, step_id=row["step_id"], item=item, **values)
