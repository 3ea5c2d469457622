"""The three kinds of leased work in one table: a task step, a fan-out item, a compensation.

Every place that handles leased work — claims, the runner, executors, recovery, retry
timers, leases, ``run_pending`` — looks the kind up here instead of branching on its
name. A kind says where its rows live, which django-q2 task runs it, how a claim reads
it, while which run statuses it may start, what it becomes when reclaimed after its run
stopped, and which retry policy it follows.

What a unit's completion or final failure does to its run belongs to the module that
owns the kind (:mod:`~workflows.engine.nodes.task`, :mod:`~workflows.engine.nodes.fanout`,
:mod:`~workflows.engine.nodes.compensation`); each registers its :class:`Settlement` with
:func:`settles`. So this table imports none of them and every module can import it:
dependencies point one way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from workflows.definitions import FanOut, LeasedNode, Retry
from workflows.definitions.nodes import default_retry
from workflows.engine.sql.claim_reads import (
    ClaimRow,
    claim_compensation_row,
    claim_item_row,
    claim_step_row,
)
from workflows.models import CompensationRecord, FanOutItem, Step
from workflows.status import RUN_ACTIVE, RUN_HELD, RUN_UNWINDING, StepStatus

if TYPE_CHECKING:
    from workflows.engine.advance import Advancer
    from workflows.engine.lease import Lease


@dataclass(frozen=True)
class FailedUnit:
    """A unit of leased work that failed for good (or was reclaimed after its run stopped)."""

    kind: WorkKind
    unit_id: int
    step_id: int
    step_name: str
    item_key: str
    error: dict[str, Any]
    generation: int = 0
    iteration: int = 1
    # The attempts the step made before its round (0 for items and compensations).
    attempts_before: int = 0

    @property
    def attempt_in_round(self) -> int | None:
        """The failed attempt (its ``error``'s, counted across rounds) within its round,
        as the events and every surface number it; ``None`` if the error names none."""
        attempt = self.error.get("attempt")
        return attempt - self.attempts_before if isinstance(attempt, int) else None

    def failure(self) -> dict[str, Any]:
        """What its ``<kind>.failed`` event says of the failure: the message, the attempt
        within its round and the failure class."""
        return {
            "error": self.error["message"],
            "attempt": self.attempt_in_round,
            "failure_class": self.error.get("failure_class", ""),
        }


class Settlement(Protocol):
    """What a kind's completion and final failure do, inside the settling transition."""

    def completed(self, advancer: Advancer, lease: Lease, output: Any) -> None:
        """The unit's row is already ``completed``: record and move the run on."""

    def failed(self, advancer: Advancer, unit: FailedUnit) -> None:
        """The unit's row is already ``failed``: apply that to its step and run."""

    def stopped(self, advancer: Advancer, unit: FailedUnit) -> None:
        """The unit was reclaimed after its run stopped; its row has ``stopped_status``."""


class BatchSettlement(Settlement, Protocol):
    """The settlement of a kind whose units are claimed and recorded in batches."""

    def ended(
        self,
        advancer: Advancer,
        completed: Sequence[tuple[Lease, Any]],
        failed: Sequence[FailedUnit],
    ) -> None:
        """Units of one step ended in one transaction: their rows are already
        ``completed`` or ``failed``; count them once and move the step on once."""


@dataclass(frozen=True)
class WorkKind:
    """One kind of leased work.

    ``runs_while``: the run statuses in which a unit may start or be retried (forward
    work while the run is active, compensations while it unwinds). ``held_while``: run
    statuses in which a unit may not start but keeps its place (a paused run: a failed
    attempt still gets its retry timer, a reclaimed one goes back to ``ready``).
    ``timer_field``: the ``Timer`` foreign key that names a unit of this kind on its
    retry timer. ``run_path``: the ORM path from a unit to its run. ``batch_size_of``:
    how many units of a node one claim may take (only fan-out items batch; their
    settlement is then a :class:`BatchSettlement`).
    """

    name: str
    model: type[Step] | type[FanOutItem] | type[CompensationRecord]
    task: str
    runs_while: frozenset[str]
    held_while: frozenset[str]
    stopped_status: str
    timer_field: str
    read_claim: Callable[..., ClaimRow | None]  # (unit id, *, preferred=True, locked=True)
    run_path: str
    retry_of: Callable[[LeasedNode], Retry]
    describe: str
    key_suffix: str = ""
    batch_size_of: Callable[[LeasedNode], int] = lambda node: 1  # unbatched by default

    @property
    def settlement(self) -> Settlement:
        return _SETTLEMENTS[self.name]

    @property
    def batch_settlement(self) -> BatchSettlement:
        settlement = self.settlement
        assert hasattr(settlement, "ended"), f"{self.name} units are never batched"
        return settlement  # type: ignore[return-value]

    def label(self, step_name: str, item_key: str = "") -> str:
        """Name one unit in messages: ``item 'a' of step 'pack'``."""
        return self.describe.format(step=step_name, item=item_key)

    def __repr__(self) -> str:
        return f"<WorkKind {self.name}>"


def _node_retry(node: LeasedNode) -> Retry:
    return node.effective_retry


def _fanout_batch_size(node: LeasedNode) -> int:
    return node.batch_size if isinstance(node, FanOut) else 1


def _compensation_retry(node: LeasedNode) -> Retry:
    """Undoing must not give up as fast as a forward step may be told to."""
    return default_retry()


STEP = WorkKind(
    name="step",
    model=Step,
    task="workflows.tasks.run_step",
    runs_while=RUN_ACTIVE,
    held_while=RUN_HELD,
    stopped_status=StepStatus.CANCELLED,
    timer_field="step",
    read_claim=claim_step_row,
    run_path="run",
    retry_of=_node_retry,
    describe="step {step!r}",
)
ITEM = WorkKind(
    name="item",
    model=FanOutItem,
    task="workflows.tasks.run_item",
    runs_while=RUN_ACTIVE,
    held_while=RUN_HELD,
    stopped_status=StepStatus.SKIPPED,
    timer_field="item",
    read_claim=claim_item_row,
    run_path="step__run",
    retry_of=_node_retry,
    describe="item {item!r} of step {step!r}",
    batch_size_of=_fanout_batch_size,
)
COMPENSATION = WorkKind(
    name="compensation",
    model=CompensationRecord,
    task="workflows.tasks.run_compensation",
    runs_while=RUN_UNWINDING,
    held_while=frozenset(),
    stopped_status=StepStatus.FAILED,
    timer_field="compensation",
    read_claim=claim_compensation_row,
    run_path="run",
    retry_of=_compensation_retry,
    describe="compensation of step {step!r}",
    key_suffix="/compensate",
)

# In the order ``run_pending`` takes ready work: forward work first.
WORK_KINDS: tuple[WorkKind, ...] = (STEP, ITEM, COMPENSATION)
_BY_NAME = {kind.name: kind for kind in WORK_KINDS}
_SETTLEMENTS: dict[str, Settlement] = {}


def work_kind(name: str) -> WorkKind:
    """The kind called ``name`` (``step``, ``item`` or ``compensation``)."""
    return _BY_NAME[name]


def settles(kind: WorkKind) -> Callable[[type], type]:
    """Class decorator: register the settlement of ``kind`` (one instance, stateless)."""

    def register(cls: type) -> type:
        _SETTLEMENTS[kind.name] = cls()
        return cls

    return register


def kind_of_timer(timer: Any) -> WorkKind:
    """The kind of unit a retry timer releases: the most specific foreign key set."""
    for kind in reversed(WORK_KINDS):
        if getattr(timer, f"{kind.timer_field}_id") is not None:
            return kind
    raise ValueError(f"timer {timer.pk} names no unit of work")
