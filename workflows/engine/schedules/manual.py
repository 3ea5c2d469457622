"""A trigger and a backfill: runs started outside the slot sequence.

A **trigger** starts one run now, keyed by its instant, whatever the overlap policy
and the pause say (an operator asked for it). A **backfill** starts the run of each
slot in a past range under the slot's own key, so a slot that already has its run
(fired, or backfilled before) gets none, and the same range again starts nothing new;
pause, ``start_at`` and the overlap policy do not apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from django.db.models import F

from workflows.engine.schedules.history import ScheduleHistory
from workflows.engine.schedules.rows import locked, write
from workflows.engine.schedules.slot_runs import start_slot, trigger_key
from workflows.engine.transaction import transition
from workflows.models import Run

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


@transition
def trigger(key: str, *, now: datetime, user: AnyUser | None = None) -> Run:
    """Start one run of schedule ``key`` now."""
    schedule = locked(key)
    history = ScheduleHistory(schedule)
    run = start_slot(
        schedule, now, history, how="trigger", key=trigger_key(schedule.pk, now), user=user
    ).value
    write(
        schedule,
        fired_count=F("fired_count") + 1,
        last_run_id=run.pk,
        last_fired_at=now,
    )
    history.flush()
    return run


@dataclass
class Backfilled:
    """What a backfill did: the runs it started, and the slots that had theirs already."""

    started: list[UUID] = field(default_factory=list)
    existing: int = 0


@transition
def backfill(
    key: str, slots: list[datetime], *, now: datetime, user: AnyUser | None = None
) -> Backfilled:
    """Start the run of each of ``slots`` (checked by the caller) that has none yet."""
    schedule = locked(key)
    history = ScheduleHistory(schedule)
    done = Backfilled()
    for slot in slots:
        started = start_slot(schedule, slot, history, how="backfill", user=user)
        if started.created:
            done.started.append(started.value.pk)
        else:
            done.existing += 1
    if done.started:
        write(
            schedule,
            fired_count=F("fired_count") + len(done.started),
            last_run_id=done.started[-1],
            last_fired_at=now,
        )
    history.flush()
    return done
