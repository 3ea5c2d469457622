"""Schedules declared in workflow classes (``schedules = [Schedule.cron(...)]``),
installed after ``migrate`` and when a worker or sweeper starts.

Installing is idempotent: a declared schedule is created when its key is new, updated
when its class changed it (its calendar moves to the first slot after now only when
the calendar changed), and left alone when nothing changed. A schedule the code
declared before and declares no more is paused, not deleted, with a note that says
so (its runs and history stay; delete it when it is not wanted). Declared again later,
it resumes. A key that an operator's schedule already uses is left to the operator,
with a warning; so is a declared schedule an operator changed (``update_schedule``
makes it the operator's).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from workflows.definitions import registry
from workflows.definitions.schedules import ScheduleSpec
from workflows.engine.schedules import rows
from workflows.engine.sql.clock import database_now
from workflows.models import Schedule, ScheduleOrigin

logger = logging.getLogger("workflows.schedules")

REMOVED_NOTE = "Paused: no workflow class declares this schedule any more"
"""The start of the note of a declared schedule paused because its class dropped it."""


@dataclass
class Installed:
    """What an installation did, by schedule key."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def declared_specs() -> dict[str, ScheduleSpec]:
    """Every schedule the latest version of each registered workflow declares, by key."""
    specs: dict[str, ScheduleSpec] = {}
    for name in sorted({workflow.name for workflow in registry.all()}):
        for spec in registry.latest(name).declared_schedules():
            specs[spec.key] = spec
    return specs


def install_declared_schedules() -> Installed:
    """Create, update, pause or resume the schedules workflow classes declare (see the
    module); return what changed."""
    done = Installed()
    specs = declared_specs()
    existing = {s.key: s for s in Schedule.objects.filter(key__in=list(specs))}
    for key, spec in specs.items():
        schedule = existing.get(key)
        if schedule is None:
            if rows.create(
                spec, paused=False, origin=ScheduleOrigin.CODE, now=database_now()
            ).created:
                done.created.append(key)
        elif schedule.origin != ScheduleOrigin.CODE:
            logger.warning(
                "schedule %r declared by workflow %r is an operator's schedule; left as it is",
                key,
                spec.workflow,
            )
            done.conflicts.append(key)
        elif schedule.paused and schedule.note.startswith(REMOVED_NOTE):
            rows.update(key, spec, now=database_now(), paused=False)
            done.resumed.append(key)
        elif schedule.spec_hash != spec.fingerprint() or schedule.note != spec.note:
            rows.update(key, spec, now=database_now())
            done.updated.append(key)
    dropped = Schedule.objects.filter(origin=ScheduleOrigin.CODE, paused=False).exclude(
        key__in=list(specs)
    )
    for schedule in dropped:
        note = (
            f"{REMOVED_NOTE} (workflow {schedule.workflow_name!r}); delete it or declare it again."
        )
        rows.set_paused(schedule.key, True, note=note, now=database_now())
        done.paused.append(schedule.key)
    return done
