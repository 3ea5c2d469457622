"""Replaying an ended run: which steps a retry or a rerun does again, and when it refuses.

Every ended run may be replayed: ``retry_run`` takes ``failed``, ``cancelled``,
``terminated``, ``compensated`` and ``compensation_failed`` runs, ``rerun_from`` those and
``completed`` ones too. What decides whether a replay is safe is not the run's status
but what became of the work its steps completed, which their compensation records say
(for the step's current generation; the records of work done before a rerun or retry
belong to work that was undone or re-armed, see below):

- **standing**: completed, no compensation record, or its compensation never ran to the
  end (``pending``: the run completed or failed without unwinding; ``skipped``: it was
  terminated or cancelled with ``compensate=False``; ``failed``: the compensation gave
  up). The work is out there.
- **undone**: completed, and its compensation completed. The work was taken back.

The rules, each for the reason that doing otherwise would leave the outside world in a
state nobody asked for:

1. **Work whose compensation never ran is never done again.** A replay that would redo
   it (a rerun resetting it; a retry redoing what depends on undone work) is refused,
   saying which step: the work would be done twice (two reservations, two charges).
2. **Undone work is done again before what depends on it.** A retry redoes every
   undone step and everything downstream of it, each in a new generation (a new
   idempotency key: it is new work); a rerun whose reset leaves an undone step out is
   refused (it would build on work that was taken back).
3. **Work that never completed is finished, not redone.** A retry gives failed,
   timed-out and cut-short (cancelled while running) steps a fresh set of attempts
   under the same idempotency key, which is what lets an outside system recognise an
   attempt it already saw (Step Functions' redrive: restart at the unsuccessful
   states, keep the successful ones). Steps cancelled before they started reopen.
4. **A compensation that failed is finished first.** A rerun of a run with a failed
   compensation is refused; ``retry_run`` runs the failed compensations again.

A replay re-arms compensations that were skipped (``skipped → pending``): that work
still stands, it is part of the replayed run, and if the run fails again it is undone
with the rest. The run's old error is cleared, and so is its deadline, unless the
replay is given a new one (:mod:`workflows.engine.deadlines`).

The rules are functions of plain facts (:class:`StepFacts`), so the verbs (which raise
:class:`InvalidTransition` with the reason) and ``explain`` (which shows it in
``allowed_actions``) cannot word or decide them differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db.models import Count
from django.db.models.fields.json import KT

from workflows.definitions import LeasedNode, Workflow
from workflows.definitions.graph import Graph
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import STEP_ROW_FIELDS, StepRow
from workflows.engine.sql.updates import cas_update, cas_update_many
from workflows.engine.telemetry.rounds import NEW_ROUND, keep_rounds
from workflows.errors import StaleState
from workflows.models import CompensationRecord, FanOutItem, Step, Timer
from workflows.status import CompensationStatus, StepStatus, TimerStatus

_SETTLED = (StepStatus.COMPLETED, StepStatus.SKIPPED)
_FAILED = (StepStatus.FAILED, StepStatus.TIMED_OUT)

# What a step reset to a new generation forgets: everything a previous run of it wrote.
FORGOTTEN: dict[str, Any] = {
    "output": None,
    "error": None,
    "failure_class": "",
    "started_at": None,
    "finished_at": None,
    "lease_owner": "",
    "lease_expires_at": None,
    "decision": "",
    "decided_via": "",
    "decided_by": None,
    "decided_at": None,
    "feedback": "",
    "selections": [],
    "claimed_by": None,
    "claimed_at": None,
    "signal_name": "",
    "awaiting": None,
    "resumed": None,
    "items_total": 0,
    "items_completed": 0,
    "items_failed": 0,
    "items_skipped": 0,
}


@dataclass(frozen=True)
class StepFacts:
    """What the replay rules need to know of one step: its status, and the statuses of
    the compensation records of its current generation (one per completed item for a
    fan-out; none for a step without ``compensate=`` or that never completed)."""

    status: str
    compensations: frozenset[str] = field(default_factory=frozenset)

    @property
    def undone(self) -> bool:
        """Some of its completed work was compensated."""
        return CompensationStatus.COMPLETED in self.compensations

    @property
    def standing_uncompensated(self) -> bool:
        """Some of its completed work stands with a compensation that never ran to the end."""
        return bool(self.compensations - {CompensationStatus.COMPLETED})

    @property
    def compensation_failed(self) -> bool:
        return CompensationStatus.FAILED in self.compensations


def step_rows_of(run_id: UUID) -> dict[str, StepRow]:
    """Every step of the run as a :class:`StepRow`, by name: one query."""
    rows = Step.objects.filter(run_id=run_id).values_list(*STEP_ROW_FIELDS)
    return {row.name: row for row in (StepRow(*values) for values in rows)}


def facts_of_rows(run_id: UUID, rows: Mapping[str, StepRow]) -> dict[str, StepFacts]:
    """The replay facts of the steps ``rows`` (:func:`step_rows_of`): one query."""
    return facts_of(
        run_id, ((row.pk, name, row.status, row.generation) for name, row in rows.items())
    )


def step_facts(run_id: UUID) -> dict[str, StepFacts]:
    """The replay facts of every step of a run: two queries."""
    steps = list(
        Step.objects.filter(run_id=run_id).values_list("id", "name", "status", "generation")
    )
    return facts_of(run_id, steps)


def facts_of(run_id: UUID, steps: Iterable[tuple[int, str, str, int]]) -> dict[str, StepFacts]:
    """The replay facts of steps already read as (id, name, status, generation): one
    query, grouped by step, status and generation, whatever the number of records."""
    steps = list(steps)
    grouped = (
        CompensationRecord.objects.filter(run_id=run_id)
        .order_by()
        .values_list("step_id", "status", KT("payload__generation"))
        .annotate(records=Count("id"))
    )
    current = {step_id: generation for step_id, _, _, generation in steps}
    found: dict[int, set[str]] = {}
    for step_id, status, generation, _ in grouped:
        if int(generation or 0) == current.get(step_id):
            found.setdefault(step_id, set()).add(status)
    return {
        name: StepFacts(status, frozenset(found.get(step_id, ())))
        for step_id, name, status, _ in steps
    }


def downstream_of(graph: Graph, names: Iterable[str]) -> list[str]:
    """``names`` and every step that depends on one of them, directly or not, in
    declaration order."""
    found = set(names)
    frontier = list(found)
    while frontier:
        for down in graph.downstream[frontier.pop()]:
            if down not in found:
                found.add(down)
                frontier.append(down)
    return [step for step in graph.nodes if step in found]


@dataclass(frozen=True)
class RetryPlan:
    """What a retry of a run does: ``redo`` (undone steps and everything after them, each
    reset to a new generation), ``retry`` (failed, timed-out and cut-short steps outside
    ``redo``: fresh attempts, same key); ``refusal`` says why it may not, else ``None``."""

    redo: tuple[str, ...]
    retry: tuple[str, ...]
    refusal: str | None = None


def retry_plan(
    graph: Graph, facts: Mapping[str, StepFacts], attempts: Mapping[str, int]
) -> RetryPlan:
    """Plan the retry of an ended run (not one whose compensation failed: its retry runs
    the compensations again). ``attempts``: each step's attempts so far (a step
    cancelled after it started was cut short and gets a fresh set)."""
    undone = [name for name, step in facts.items() if step.undone]
    redo = downstream_of(graph, undone)
    for name in redo:
        if facts[name].standing_uncompensated:
            cause = next(up for up in undone if name in downstream_of(graph, [up]))
            return RetryPlan(
                (),
                (),
                f"step {name!r} completed work whose compensation never ran, and it depends "
                f"on {cause!r}, whose work was compensated: a retry would do {cause!r} again "
                f"and then {name!r}'s work twice; start a new run instead",
            )
    redone = set(redo)
    retry = tuple(
        name
        for name, step in facts.items()
        if name not in redone
        and (
            step.status in _FAILED
            or (step.status == StepStatus.CANCELLED and attempts.get(name, 0) > 0)
        )
    )
    return RetryPlan(tuple(redo), retry)


def rerun_order_refusal(
    graph: Graph, step_name: str, reset: Sequence[str], facts: Mapping[str, StepFacts]
) -> str | None:
    """Why a rerun from ``step_name`` cannot continue the run: an upstream that did not
    complete, or a failure it would leave behind."""
    for upstream in graph.upstream[step_name]:
        if facts[upstream].status not in _SETTLED:
            return (
                f"rerun from {step_name!r} needs its upstream steps completed or skipped; "
                f"{upstream!r} is {facts[upstream].status}"
            )
    for name, step in facts.items():
        if step.status in _FAILED and name not in reset:
            return (
                f"step {name!r} failed too and is not downstream of {step_name!r}; "
                "rerun from it, or retry the run"
            )
    return None


def rerun_compensation_refusal(
    step_name: str, reset: Sequence[str], facts: Mapping[str, StepFacts]
) -> str | None:
    """Why a rerun from ``step_name`` would redo work whose compensation never ran, or
    build on work that was undone or half undone (rules 1, 2 and 4)."""
    for name, step in facts.items():
        if step.compensation_failed:
            return (
                f"the compensation of step {name!r} failed: its work is neither standing "
                "nor undone; retry the run to run the compensation again first"
            )
    for name in reset:
        if facts[name].standing_uncompensated:
            return (
                f"step {name!r} completed work whose compensation never ran; rerunning it "
                "would do that work twice"
            )
    for name, step in facts.items():
        if step.undone and name not in reset:
            return (
                f"step {name!r} was compensated (its work undone) and is not downstream of "
                f"{step_name!r}, so the rerun would build on undone work; rerun from "
                f"{name!r} or an earlier step, or retry the run"
            )
    return None


def reset_generation(
    row: StepRow, workflow: type[Workflow], *, round_kept: bool = False, **changes: Any
) -> None:
    """A new generation of the step: pending, with a fresh set of attempts, and a new
    idempotency key (``<run>/<step>#<generation>``) for it, its items and compensations.
    It starts a new round (:mod:`workflows.engine.telemetry.rounds`): the ended one is kept first,
    unless ``round_kept`` says the caller kept it with others.

    ``changes`` are written with it (a loop's next ``iteration``); ``row`` carries the
    new status, version and generation afterwards."""
    if not round_kept:
        keep_rounds([row.pk])
    node = workflow.nodes[row.name]
    attempts = node.effective_retry.max_attempts if isinstance(node, LeasedNode) else 1
    if not cas_update(
        Step,
        row.pk,
        version=row.version,
        where={"status": row.status},
        status=StepStatus.PENDING,
        max_attempts=row.attempt + attempts,
        generation=row.generation + 1,
        updated_at=db_now(),
        **{**FORGOTTEN, **NEW_ROUND, **changes},
    ):
        raise StaleState(f"step {row.name!r} changed while being reset")
    row.status, row.version = StepStatus.PENDING, row.version + 1
    row.max_attempts, row.generation = row.attempt + attempts, row.generation + 1
    row.iteration = changes.get("iteration", row.iteration)


def forget_work_of(step_ids: Sequence[int]) -> None:
    """Reset steps lose their fan-out items (computed again on entry; their history stays
    in the events) and their scheduled timers.

    Compensation records of completed items that may still run (``pending``: a loop's
    earlier rounds, in an active run) stay: they let go of their item rows first, and
    their payload keeps the item's key. (A rerun or a retry never resets a step with
    such records: replaying work whose compensation never ran is refused.)"""
    if not step_ids:
        return
    cas_update_many(
        CompensationRecord,
        where={"step_id": list(step_ids), "status": CompensationStatus.PENDING},
        item=None,
    )
    FanOutItem.objects.filter(step_id__in=step_ids).delete()
    cas_update_many(
        Timer,
        where={"step_id": list(step_ids), "status": TimerStatus.SCHEDULED},
        status=TimerStatus.CANCELLED,
    )


def rearm_skipped_compensations(run_id: UUID) -> int:
    """Compensations a terminate or a cancel without compensation skipped become
    pending again: their work still stands and belongs to the replayed run."""
    return len(
        cas_update_many(
            CompensationRecord,
            where={"run_id": run_id, "status": CompensationStatus.SKIPPED},
            status=CompensationStatus.PENDING,
            updated_at=db_now(),
        )
    )
