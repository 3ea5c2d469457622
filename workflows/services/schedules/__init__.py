"""The schedule verbs every surface calls (:mod:`.verbs`), and the installation of the
schedules workflow classes declare (:mod:`.declared`)."""

from __future__ import annotations

from workflows.services.schedules.declared import install_declared_schedules
from workflows.services.schedules.verbs import (
    BackfillResult,
    backfill_schedule,
    create_schedule,
    create_schedule_once,
    delete_schedule,
    get_schedule,
    next_fire_times,
    pause_schedule,
    trigger_schedule,
    unpause_schedule,
    update_schedule,
)

__all__ = [
    "BackfillResult",
    "backfill_schedule",
    "create_schedule",
    "create_schedule_once",
    "delete_schedule",
    "get_schedule",
    "install_declared_schedules",
    "next_fire_times",
    "pause_schedule",
    "trigger_schedule",
    "unpause_schedule",
    "update_schedule",
]
