"""Beginning an attempt of a task: the one place a step becomes ``running``."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from workflows.definitions import Task, Workflow
from workflows.engine.events import EventLog
from workflows.engine.lease import Lease
from workflows.engine.sql import StepRow, cas_update, db_now, db_now_plus
from workflows.models import Step
from workflows.status import StepStatus


def begin_attempt(
    row: StepRow,
    *,
    run_id: UUID,
    run_input: dict[str, Any],
    workflow: type[Workflow],
    owner: str,
    events: EventLog,
) -> Lease | None:
    """Compare-and-set ``row`` from its current status to ``running`` for ``owner``.

    ``attempt`` goes up by one and the lease expires after the task's timeout on the
    database clock. Returns ``None`` when the row changed since it was read (another
    worker claimed it first): nothing is written then.
    """
    node = workflow.nodes[row.name]
    assert isinstance(node, Task)
    attempt = row.attempt + 1
    if not cas_update(
        Step,
        row.pk,
        version=row.version,
        where={"status": row.status},
        status=StepStatus.RUNNING,
        attempt=attempt,
        lease_owner=owner,
        lease_expires_at=db_now_plus(node.effective_timeout),
        started_at=db_now(),
        updated_at=db_now(),
    ):
        return None
    row.status, row.version, row.attempt = StepStatus.RUNNING, row.version + 1, attempt
    events.add(run_id, "step.started", step_id=row.pk, attempt=attempt, owner=owner)
    return Lease(
        step_id=row.pk,
        run_id=run_id,
        step_name=row.name,
        attempt=attempt,
        owner=owner,
        version=row.version,
        workflow=workflow,
        run_input=run_input,
    )
