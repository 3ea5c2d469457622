"""Every iteration of a step a loop ran again: the finished ones (``StepIteration`` rows,
archived when the next iteration reset the step) and the current one (the step row).

Oldest first, as ``(generation, iteration)`` orders them: each iteration is a new
generation, and a rerun that starts the count again still makes a newer generation.
The run page reads the earlier iterations of all its steps at once
(:func:`earlier_iterations`); the API and a caller asking about one step read
:func:`step_iterations`, in a fixed three queries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import QuerySet

from workflows.errors import StepNotFound
from workflows.models import Run, Step, StepIteration
from workflows.queries.runs import get_run
from workflows.status import attempt_in_round

__all__ = [
    "Iteration",
    "archived_iterations",
    "as_iteration",
    "earlier_iterations",
    "named_step",
    "step_iterations",
]


@dataclass(frozen=True)
class Iteration:
    """What one iteration of a step did: its outcome, and its gate's decision when the
    step is a gate (``decided_by`` is the decider's username). ``current`` marks the
    iteration the step row holds now."""

    iteration: int
    generation: int
    status: str
    attempt: int
    output: Any
    error: Any
    failure_class: str
    decision: str
    decided_via: str
    decided_by: str | None
    decided_at: datetime | None
    feedback: str
    selections: Any
    started_at: datetime | None
    finished_at: datetime | None
    current: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def outcome(self) -> str:
        """What the iteration came to, as its badge says it: a decided gate's decision
        (a rejected round of a loop completes its gate step, yet was rejected), else its
        status."""
        return self.decision or self.status


def as_iteration(row: Step | StepIteration, *, current: bool) -> Iteration:
    """One iteration from the row that holds it (its decider loaded); its ``attempt``
    the attempts its last round made, as every surface numbers them."""
    decider = row.decided_by
    before = row.round_attempts_before if isinstance(row, Step) else row.attempts_before
    return Iteration(
        iteration=row.iteration,
        generation=row.generation,
        status=row.status,
        attempt=attempt_in_round(row.attempt, row.attempt, before).attempt,
        output=row.output,
        error=row.error,
        failure_class=row.failure_class,
        decision=row.decision,
        decided_via=row.decided_via,
        decided_by=decider.get_username() if decider is not None else None,
        decided_at=row.decided_at,
        feedback=row.feedback,
        selections=row.selections,
        started_at=row.started_at,
        finished_at=row.finished_at,
        current=current,
    )


def archived_iterations(step_ids: Iterable[int]) -> QuerySet[StepIteration]:
    """The finished iterations of these steps, oldest first, their deciders joined."""
    return (
        StepIteration.objects.filter(step_id__in=list(step_ids))
        .select_related("decided_by")
        .order_by("step_id", "generation", "iteration")
    )


def step_iterations(run: Run | UUID | str, step: str) -> list[Iteration]:
    """Every iteration of the step of ``run`` named ``step``, oldest first, the current
    one last: :class:`~workflows.errors.RunNotFound` or
    :class:`~workflows.errors.StepNotFound` otherwise. Three queries (two given a run):
    the run, the step with its decider, the archived iterations with theirs."""
    found_run = run if isinstance(run, Run) else get_run(run)
    found = named_step(found_run, step)
    earlier = [as_iteration(row, current=False) for row in archived_iterations([found.pk])]
    return [*earlier, as_iteration(found, current=True)]


def named_step(run: Run, step: str) -> Step:
    """The step of ``run`` named ``step``, its decider joined, in one query:
    :class:`~workflows.errors.StepNotFound` otherwise."""
    # Step names are identifiers: anything else (a NUL, which PostgreSQL refuses in a
    # parameter) names no step, and is not asked about.
    found = None
    if step.isascii() and step.isidentifier():
        found = Step.objects.filter(run_id=run.pk, name=step).select_related("decided_by").first()
    if found is None:
        raise StepNotFound(f"run {run.pk} has no step {step!r}", step=step)
    return found


def earlier_iterations(steps: Iterable[Step]) -> dict[int, list[Iteration]]:
    """The finished iterations of ``steps`` (step id → oldest first), in one query; a
    step that never ran again has none. Only steps past their first iteration are asked
    about, so a run without loops costs no query."""
    looped = [step.pk for step in steps if step.iteration > 1]
    found: dict[int, list[Iteration]] = {}
    if not looped:
        return found
    for row in archived_iterations(looped):
        found.setdefault(row.step_id, []).append(as_iteration(row, current=False))
    return found
