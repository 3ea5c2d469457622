"""Transitions that repair what crashes and lost messages leave behind."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.db import transaction

from workflows.definitions import registry
from workflows.engine.advance import Advancer
from workflows.engine.db import transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.runs import fail_run
from workflows.engine.sql import cas_update, db_now, lock_run
from workflows.errors import DefinitionMissing
from workflows.models import Run, Step
from workflows.status import RUN_ACTIVE, StepStatus


@transition
def redispatch_step(step_id: int, *, ready_before: datetime) -> bool:
    """Send a ``ready`` step nobody claimed since ``ready_before`` to the executor again.

    The compare-and-set touches ``updated_at`` so the step is not re-sent on every scan;
    it loses (returns ``False``) when a worker claimed the step meanwhile.
    """
    row = (
        Step.objects.filter(pk=step_id, status=StepStatus.READY, updated_at__lt=ready_before)
        .only("id", "run_id", "version")
        .first()
    )
    if row is None or not cas_update(
        Step, row.pk, version=row.version, where={"status": StepStatus.READY}, updated_at=db_now()
    ):
        return False
    events = EventLog()
    events.add(row.run_id, "step.redispatched", step_id=row.pk)
    events.flush()
    enqueue([row.pk])
    return True


@transition
def repair_run(run_id: UUID) -> bool:
    """Re-evaluate an active run that has nothing in flight; return whether it changed.

    Releases pending steps whose upstreams are all final and settles the run's status
    (running, waiting, completed). A run whose definition is gone fails with
    ``definition_missing``.
    """
    run = lock_run(run_id)
    if run.status not in RUN_ACTIVE:
        return False
    events = EventLog()
    try:
        workflow = registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing as missing:
        fail_run(run, missing.as_dict(), events)
    else:
        advancer = Advancer(run, workflow, events)
        advancer.release_stranded()
        advancer.finish()
        enqueue(advancer.ready_step_ids)
    if not events:
        return False
    events.add(run.pk, "run.repaired")
    events.flush()
    return True


def delete_finished_runs(run_ids: list[UUID], *, finished_before: datetime) -> int:
    """Delete finished top-level runs (with their steps, children and history).

    Re-checks each run's status and age in the delete itself, so a run that an operator
    retried meanwhile is kept. Returns how many runs were deleted.
    """
    with transaction.atomic():
        _, per_model = (
            Run.objects.filter(
                pk__in=run_ids, parent_run__isnull=True, finished_at__lt=finished_before
            )
            .exclude(status__in=RUN_ACTIVE)
            .delete()
        )
    return per_model.get(Run._meta.label, 0)
