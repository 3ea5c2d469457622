"""A schedule's row made, changed, paused, resumed and deleted.

Each write is one transition that locks the row (``SELECT … FOR UPDATE`` on
PostgreSQL; SQLite's writers take turns) and updates it with a compare-and-set on the
version it read, so a sweeper deciding its slots and an operator's change never both
apply to one version. The next slot is computed from ``now`` (the database clock the
sweeper fires on) whenever the calendar changes or the schedule resumes: slots passed
while it was paused are not caught up.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError
from django.db.models import F
from django.db.models.functions import Now

from workflows.definitions.schedules import ScheduleSpec, fire_time, slots_after
from workflows.engine.created import Created
from workflows.engine.schedules.history import ScheduleHistory
from workflows.engine.transaction import transition
from workflows.errors import IdempotencyConflict, ScheduleNotFound
from workflows.models import Schedule, ScheduleOrigin

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

CALENDAR_FIELDS = ("cron", "every", "tz", "start_at", "end_at", "jitter")
"""The fields whose change moves the next slot."""


def next_slot_columns(calendar: Any, key: str, now: datetime) -> dict[str, datetime | None]:
    """``next_slot_at`` and ``next_fire_at`` of the first slot after ``now``."""
    slot = next(slots_after(calendar, now), None)
    fire = fire_time(slot, calendar.jitter, key) if slot is not None else None
    return {"next_slot_at": slot, "next_fire_at": fire}


def locked(key: str) -> Schedule:
    """The schedule ``key``, locked for this transaction; :class:`ScheduleNotFound`."""
    schedule = Schedule.objects.select_for_update().filter(key=key).first()
    if schedule is None:
        raise ScheduleNotFound(f"no schedule has the key {key!r}", key=key)
    return schedule


def write(schedule: Schedule, **changes: Any) -> None:
    """Apply ``changes`` to the locked ``schedule`` with a compare-and-set on its version."""
    written = Schedule.objects.filter(pk=schedule.pk, version=schedule.version).update(
        version=F("version") + 1, updated_at=Now(), **changes
    )
    assert written == 1, "the row lock of this transaction holds the version"
    for name, value in changes.items():
        if not hasattr(value, "resolve_expression"):
            setattr(schedule, name, value)
    schedule.version += 1


def create(
    spec: ScheduleSpec,
    *,
    paused: bool,
    origin: str,
    now: datetime,
    user: AnyUser | None = None,
) -> Created[Schedule]:
    """The schedule of ``spec``, made now, or the one made before with its key and the
    same spec (``created=False``); another spec under the key is :class:`IdempotencyConflict`.
    Of two creations racing on one key, the one whose insert loses reads the winner's."""
    existing = Schedule.objects.filter(key=spec.key).first()
    if existing is not None:
        return Created(_same(existing, spec), created=False)
    try:
        return Created(_insert(spec, paused, origin, now, user), created=True)
    except IntegrityError:
        existing = Schedule.objects.filter(key=spec.key).first()
        if existing is None:
            raise
        return Created(_same(existing, spec), created=False)


@transition
def _insert(
    spec: ScheduleSpec, paused: bool, origin: str, now: datetime, user: AnyUser | None
) -> Schedule:
    schedule = Schedule.objects.create(
        key=spec.key,
        **Schedule.spec_columns(spec),
        **next_slot_columns(spec, spec.key, now),
        paused=paused,
        note=spec.note,
        origin=origin,
        created_by=user if isinstance(user, get_user_model()) else None,
    )
    history = ScheduleHistory(schedule)
    history.add("schedule.created", origin=origin, **_who(user))
    history.flush()
    return schedule


def _same(existing: Schedule, spec: ScheduleSpec) -> Schedule:
    if existing.spec_hash != spec.fingerprint():
        raise IdempotencyConflict(
            f"schedule {spec.key!r} exists with another specification; change it with "
            "update_schedule",
            key=spec.key,
        )
    return existing


@transition
def update(
    key: str, spec: ScheduleSpec, *, now: datetime, user: AnyUser | None = None, **state: Any
) -> Schedule:
    """Store ``spec`` (and ``state``: ``paused``, ``origin``) for schedule ``key``; a
    changed calendar moves the next slot to the first after ``now``."""
    schedule = locked(key)
    changes: dict[str, Any] = dict(Schedule.spec_columns(spec), note=spec.note, **state)
    before = schedule.spec()
    if any(getattr(before, name) != getattr(spec, name) for name in CALENDAR_FIELDS):
        changes.update(next_slot_columns(spec, key, now))
    if state.get("paused") is False and schedule.paused:
        changes.update(next_slot_columns(spec, key, now))
    changed = sorted(
        name
        for name in ("workflow", "input", "overlap", "catchup_window", "note", *CALENDAR_FIELDS)
        if getattr(before, name) != getattr(spec, name)
    )
    write(schedule, **changes)
    history = ScheduleHistory(schedule)
    history.add("schedule.updated", changed=changed, **_who(user))
    history.flush()
    return schedule


@transition
def set_paused(
    key: str, paused: bool, *, note: str | None, now: datetime, user: AnyUser | None = None
) -> Schedule:
    """Pause (with ``note``) or resume schedule ``key``. Resuming starts from the first
    slot after ``now``. Pausing a paused schedule changes only its note."""
    schedule = locked(key)
    changes: dict[str, Any] = {"paused": paused}
    if note is not None:
        changes["note"] = note
    if not paused and schedule.paused:
        changes.update(next_slot_columns(schedule, key, now))
    was = schedule.paused
    write(schedule, **changes)
    if was != paused:
        history = ScheduleHistory(schedule)
        history.add(
            "schedule.paused" if paused else "schedule.unpaused",
            note=schedule.note if paused else "",
            **_who(user),
        )
        history.flush()
    return schedule


@transition
def delete(key: str, *, user: AnyUser | None = None) -> None:
    """Delete schedule ``key``; its runs and events stay, no longer pointing at it."""
    schedule = locked(key)
    history = ScheduleHistory(schedule)
    history.add("schedule.deleted", **_who(user))
    history.flush()
    Schedule.objects.filter(pk=schedule.pk, version=schedule.version).delete()


def _who(user: AnyUser | None) -> dict[str, Any]:
    name = getattr(user, "get_username", None)
    return {"by": name()} if callable(name) and getattr(user, "is_authenticated", False) else {}


__all__ = ["ScheduleOrigin", "create", "delete", "locked", "set_paused", "update", "write"]
