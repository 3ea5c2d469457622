"""Schedules as data: what a schedule says (:class:`ScheduleSpec`, checked whole before
anything is written) and the instants its slots fall on (:mod:`.slots`).

Pure Python: nothing here reads the database. The model that stores a schedule and
the engine that fires it live in ``workflows.models`` and ``workflows.engine.schedules``.
"""

from __future__ import annotations

from workflows.definitions.schedules.declared import Schedule
from workflows.definitions.schedules.slots import (
    fire_time,
    next_fire_times,
    slots_after,
    slots_between,
)
from workflows.definitions.schedules.spec import OVERLAP_POLICIES, Overlap, ScheduleSpec

__all__ = [
    "OVERLAP_POLICIES",
    "Overlap",
    "Schedule",
    "ScheduleSpec",
    "fire_time",
    "next_fire_times",
    "slots_after",
    "slots_between",
]
