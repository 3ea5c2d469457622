"""What a verb acts on, from what a caller hands it: a model instance, an id, or (for
runs) an id prefix."""

from __future__ import annotations

from uuid import UUID

from workflows.models import Run, Step
from workflows.queries import get_run, get_step


def step_of(step: Step | int) -> Step:
    """The step, read again (a caller's instance may be stale): :class:`StepNotFound`."""
    return get_step(step.pk if isinstance(step, Step) else step)


def run_id_of(run: Run | UUID | str) -> UUID:
    """The run's id, from a run, its id or a unique prefix: :class:`RunNotFound`."""
    return run.pk if isinstance(run, Run) else get_run(run).pk
