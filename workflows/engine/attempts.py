"""Beginning an attempt of leased work: the one place a unit becomes ``running``."""

from __future__ import annotations

import dataclasses

from django.db import models

from workflows.engine.events import EventLog
from workflows.engine.lease import Lease
from workflows.engine.sql import StepRow, cas_update, db_now, db_now_plus
from workflows.status import StepStatus


def begin_attempt(
    model: type[models.Model], row: StepRow, template: Lease, events: EventLog
) -> Lease | None:
    """Compare-and-set ``row`` (a step, item or compensation) to ``running`` for an owner.

    ``template`` carries who claims and what the worker needs; its attempt and version
    are filled in here. ``attempt`` goes up by one and the lease expires after the
    node's timeout on the database clock. Returns ``None`` when the row changed since it
    was read (another worker claimed it first): nothing is written then.
    """
    attempt = row.attempt + 1
    extra = {} if model.__name__ == "CompensationRecord" else {"started_at": db_now()}
    if not cas_update(
        model,
        row.pk,
        version=row.version,
        where={"status": row.status},
        status=StepStatus.RUNNING,
        attempt=attempt,
        lease_owner=template.owner,
        lease_expires_at=db_now_plus(template.node.effective_timeout),
        updated_at=db_now(),
        **extra,
    ):
        return None
    row.status, row.version, row.attempt = StepStatus.RUNNING, row.version + 1, attempt
    lease = dataclasses.replace(template, attempt=attempt, version=row.version)
    events.add(
        lease.run_id,
        f"{lease.kind}.started",
        step_id=lease.step_id,
        attempt=attempt,
        owner=lease.owner,
        **({"item": lease.item_key} if lease.item_id is not None else {}),
    )
    return lease
