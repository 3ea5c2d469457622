"""The run of one slot, created at most once.

Its idempotency key is ``schedule:<schedule id>:<slot in UTC>``, so the slot's run is
one row however many sweepers decide it, however often a backfill names it, and across
a crash between the decision and the start (both are in one transaction, under the
schedule's row). A trigger's
run is keyed by the trigger's instant instead: ``schedule:<id>:trigger:<instant>``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from workflows.definitions import registry
from workflows.engine.created import Created
from workflows.engine.schedules.history import ScheduleHistory
from workflows.engine.start import NewRun, create_run
from workflows.models import Run, Schedule
from workflows.status import RunTrigger

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def slot_key(schedule_id: int, slot: datetime) -> str:
    """The idempotency key of the run of ``slot`` of schedule ``schedule_id``."""
    return f"schedule:{schedule_id}:{slot.astimezone(UTC).isoformat()}"


def trigger_key(schedule_id: int, at: datetime) -> str:
    """The idempotency key of a run triggered at ``at``, outside the slot sequence."""
    return f"schedule:{schedule_id}:trigger:{at.astimezone(UTC).isoformat()}"


def slot_run(schedule: Schedule, key: str) -> Run | None:
    """The run already started under ``key``, if any."""
    return Run.objects.filter(workflow_name=schedule.workflow_name, idempotency_key=key).first()


def start_slot(
    schedule: Schedule,
    slot: datetime,
    history: ScheduleHistory,
    *,
    how: str,
    key: str | None = None,
    late_ms: int | None = None,
    user: AnyUser | None = None,
) -> Created[Run]:
    """Start the run of ``slot`` inside the caller's transition, or return the one
    started before under the slot's key (``created=False``).

    ``how`` says what started it (``slot``, ``catchup``, ``buffered``, ``trigger``,
    ``backfill``), in the ``schedule.fired`` event. Raises ``DefinitionMissing`` when the
    workflow is no longer registered and ``InvalidInput`` when its input no longer
    fits the workflow; the caller records the slot as missed.
    """
    key = key or slot_key(schedule.pk, slot)
    existing = slot_run(schedule, key)
    if existing is not None:
        return Created(existing, created=False)
    definition = registry.resolve(schedule.workflow_name)
    data = definition.check_input(schedule.input)
    new = NewRun(
        definition,
        data,
        idempotency_key=key,
        user=user,
        priority=definition.default_priority,
        schedule_id=schedule.pk,
        scheduled_for=slot,
        trigger=RunTrigger.SCHEDULE,
    )
    # The caller holds the schedule's row (its claim, or its lock), so no other
    # decision of this schedule inserts the key meanwhile; a start under the same key by
    # hand would make the insert fail and roll the whole pass back, to be decided again.
    scope = create_run(new)
    scope.close()
    payload: dict[str, Any] = {"slot": slot.isoformat(), "how": how}
    if late_ms is not None:
        payload["late_ms"] = late_ms
    history.add("schedule.fired", run_id=scope.run.pk, **payload)
    return Created(scope.run, created=True)
