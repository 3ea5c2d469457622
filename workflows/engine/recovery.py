"""Transitions that repair what crashes and lost messages leave behind."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.db import models, transaction

from workflows.definitions import registry
from workflows.engine.advance import Advancer
from workflows.engine.db import transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.runs import fail_run, unwind
from workflows.engine.sql import cas_update, db_now, engine_alias, lock_run
from workflows.errors import DefinitionMissing
from workflows.models import CompensationRecord, FanOutItem, Run, Step
from workflows.status import RUN_ACTIVE, RUN_UNWINDING, StepStatus

# The kind of ready work each model holds, for the executor.
WORK_KINDS: dict[type[models.Model], str] = {
    Step: "step",
    FanOutItem: "item",
    CompensationRecord: "compensation",
}


@transition
def redispatch(model: type[models.Model], unit_id: int, *, ready_before: datetime) -> bool:
    """Send ready work nobody claimed since ``ready_before`` to the executor again.

    The compare-and-set touches ``updated_at`` so the work is not re-sent on every scan;
    it loses (returns ``False``) when a worker claimed it meanwhile.
    """
    row = (
        model.objects.filter(pk=unit_id, status=StepStatus.READY, updated_at__lt=ready_before)
        .only("id", "version")
        .first()
    )
    if row is None or not cas_update(
        model, row.pk, version=row.version, where={"status": StepStatus.READY}, updated_at=db_now()
    ):
        return False
    kind = WORK_KINDS[model]
    run_id, step_id = _owners(model, row.pk)
    events = EventLog()
    events.add(run_id, f"{kind}.redispatched", step_id=step_id, unit=row.pk)
    events.flush()
    enqueue([(kind, row.pk)])
    return True


def _owners(model: type[models.Model], unit_id: int) -> tuple[UUID, int]:
    """The run and step a unit of ready work belongs to, for its history."""
    if model is Step:
        return Step.objects.values_list("run_id", "id").get(pk=unit_id)
    if model is FanOutItem:
        return FanOutItem.objects.values_list("step__run_id", "step_id").get(pk=unit_id)
    return CompensationRecord.objects.values_list("run_id", "step_id").get(pk=unit_id)


@transition
def repair_run(run_id: UUID, *, wait: bool = True) -> bool:
    """Re-evaluate a run that has nothing in flight; return whether it changed.

    An active run: releases pending steps whose upstreams are all final and settles its
    status (running, waiting, completed); a run whose definition is gone fails with
    ``definition_missing``. An unwinding run: releases its next compensation or ends.
    """
    run = lock_run(run_id, wait=wait)
    events = EventLog()
    if run.status in RUN_UNWINDING:
        unwind(run, events)
    elif run.status not in RUN_ACTIVE:
        return False
    else:
        try:
            workflow = registry.get(run.workflow_name, run.workflow_version)
        except DefinitionMissing as missing:
            fail_run(run, missing.as_dict(), events)
        else:
            advancer = Advancer(run, workflow, events)
            advancer.release_stranded()
            advancer.finish()
            enqueue(advancer.ready_work)
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
    with transaction.atomic(using=engine_alias()):
        _, per_model = (
            Run.objects.filter(
                pk__in=run_ids, parent_run__isnull=True, finished_at__lt=finished_before
            )
            .exclude(status__in=RUN_ACTIVE)
            .delete()
        )
    return per_model.get(Run._meta.label, 0)
