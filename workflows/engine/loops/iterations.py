"""A new iteration of steps a loop runs again.

What a step did in the iteration that ends is copied into a ``StepIteration`` row (one
``INSERT ... SELECT`` for all of them), then each step row is reset as a rerun resets
it (:func:`~workflows.engine.replay.reset_generation`: pending, fresh attempts, a new
generation and so a new idempotency key for it, its items and its compensations) with
the next ``iteration``. Its fan-out items and scheduled timers go
(:func:`~workflows.engine.replay.forget_work_of`); compensation records stay, so a
failure later undoes the work of every iteration.

A loop node inside the body (a nested loop) is not archived: its ``iteration`` counts
the rounds of its own body and starts again at 1.
"""

from __future__ import annotations

from collections.abc import Sequence

from workflows.definitions import Loop, Workflow
from workflows.engine.replay import forget_work_of, reset_generation
from workflows.engine.sql.iterations import archive_iterations
from workflows.engine.sql.rows import StepRow
from workflows.models import Step, StepIteration


def start_next_iteration(rows: Sequence[StepRow], workflow: type[Workflow]) -> None:
    """Archive ``rows`` (final steps of a loop's body) and reset each to its next
    iteration; a nested loop node starts counting its rounds again. Each ``row``
    carries its new status, version, generation and iteration afterwards."""
    looped = [row for row in rows if not isinstance(workflow.nodes[row.name], Loop)]
    archive_iterations([row.pk for row in looped])
    for row in rows:
        if isinstance(workflow.nodes[row.name], Loop):
            reset_generation(row, workflow, iteration=1)
        else:
            reset_generation(row, workflow, iteration=row.iteration + 1)
    forget_work_of([row.pk for row in rows])


def iteration_of(step_id: int, generation: int) -> int:
    """The iteration of ``step_id`` that its ``generation`` ran (each iteration is a
    generation): the step's current one, or an archived one; 1 for a generation no loop
    made (a rerun's). One query, or two for a compensation of an earlier iteration."""
    current = Step.objects.filter(pk=step_id).values_list("generation", "iteration").first()
    if current is None or current[0] == generation:
        return current[1] if current is not None else 1
    earlier = StepIteration.objects.filter(step_id=step_id, generation=generation)
    return earlier.values_list("iteration", flat=True).first() or 1
