"""What a verb acts on, from what a caller hands it: a model instance, an id, or (for
runs) an id prefix."""

from __future__ import annotations

from uuid import UUID

from workflows.errors import StepNotFound
from workflows.models import Run, Step
from workflows.queries import get_run, get_step


def step_of(step: Step | int) -> Step:
    """The step, read again (a caller's instance may be stale): :class:`StepNotFound`."""
    return get_step(step.pk if isinstance(step, Step) else step)


def run_id_of(run: Run | UUID | str) -> UUID:
    """The run's id, from a run, its id or a unique prefix: :class:`RunNotFound`."""
    return run.pk if isinstance(run, Run) else get_run(run).pk


def step_in_run(run: Run, step: str) -> Step:
    """The step of ``run`` named ``step``, or with that id (a step's name is never all
    digits): :class:`StepNotFound` naming the run's steps otherwise."""
    if step.isdigit():
        found = get_step(step)
        if found.run_id != run.pk:
            raise StepNotFound(f"step {step} is not a step of run {run.pk}", step=step)
        return found
    named = Step.objects.filter(run_id=run.pk, name=step).first()
    if named is None:
        names = ", ".join(
            Step.objects.filter(run_id=run.pk).order_by("id").values_list("name", flat=True)
        )
        raise StepNotFound(f"run {run.pk} has no step {step!r} (its steps: {names})", step=step)
    return named
