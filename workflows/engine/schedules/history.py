"""A schedule's events, written in the transaction that decided them.

They go to the one event table (``Event.schedule`` set; ``run`` too for
``schedule.fired``), so hooks, webhooks and consumers read them as any other event.
Each names its schedule's key and workflow in its payload too: an event delivered after
its schedule was deleted (``Event.schedule`` emptied) still says whose it was.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from workflows.engine.wakeups import events_written
from workflows.models import Event, Schedule


class ScheduleHistory:
    """Events of one schedule, collected during a transition and inserted together."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule_id = schedule.pk
        self.names = {"key": schedule.key, "workflow": schedule.workflow_name}
        self._rows: list[Event] = []

    def add(self, type: str, *, run_id: UUID | None = None, **payload: Any) -> None:
        self._rows.append(
            Event(
                schedule_id=self.schedule_id,
                run_id=run_id,
                type=type,
                payload={**self.names, **payload},
            )
        )

    def flush(self) -> None:
        if self._rows:
            Event.objects.bulk_create(self._rows)
            events_written(row.run_id for row in self._rows)
            self._rows = []
