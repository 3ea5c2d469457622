"""Running work for the tests of "revoke lease" on each surface (console, API, command): a
step, fan-out items and a compensation, each of which a test claims and then revokes."""

from __future__ import annotations

import workflows
from tests.support.handlers import BOOM, UNDO, WORK
from workflows import FanOut, Retry, Task, Workflow
from workflows.engine import COMPENSATION, ITEM, claim, claim_step
from workflows.models import CompensationRecord, FanOutItem, Run, Step
from workflows.testing import run_pending


class Wedged(Workflow):
    name = "revoke_wedged"
    load = Task(WORK, retry=Retry(max_attempts=1))


class Parcels(Workflow):
    name = "revoke_parcels"
    ship = FanOut(WORK, items=lambda ctx: ["p1", "p2"], key=lambda item: item)


class Undoing(Workflow):
    name = "revoke_undoing"
    reserve = Task(WORK, compensate=UNDO)
    charge = Task(BOOM)


def running_load(owner: str, *, business_key: str | None = None) -> tuple[Run, Step]:
    """A new run of :class:`Wedged` whose step ``load`` ``owner`` has claimed (attempt 1)."""
    run = workflows.start_run(Wedged, business_key=business_key)
    step = Step.objects.get(run=run, name="load")
    claim_step(step.pk, owner)
    return run, Step.objects.get(pk=step.pk)


def running_item(key: str, owner: str) -> tuple[Run, FanOutItem]:
    """A new run of :class:`Parcels` whose item ``key`` ``owner`` has claimed (attempt 1)."""
    run = workflows.start_run(Parcels)
    item = FanOutItem.objects.get(step__run=run, key=key)
    claim(ITEM, item.pk, owner)
    return run, item


def running_compensation(owner: str) -> tuple[Run, CompensationRecord]:
    """A new run of :class:`Undoing` whose charge failed, and whose compensation of
    ``reserve`` ``owner`` has claimed (attempt 1)."""
    run = workflows.start_run(Undoing)
    run_pending(max_rounds=1)
    record = CompensationRecord.objects.get(run=run)
    claim(COMPENSATION, record.pk, owner)
    return run, record
