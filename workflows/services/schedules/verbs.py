"""Schedules made, changed, paused, resumed, triggered, backfilled and deleted.

Every argument is checked whole before anything is written (:class:`ScheduleSpec`):
a refusal is :class:`InvalidInput` naming the field. Times are the database clock's,
the clock the sweeper fires slots on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from workflows.definitions import Workflow, registry
from workflows.definitions.schedules import (
    ScheduleSpec,
    next_fire_times as _next_fire_times,
    slots_between,
)
from workflows.definitions.schedules.spec import check_moment
from workflows.engine.created import Created, value_of
from workflows.engine.schedules import manual, rows
from workflows.engine.schedules.slot_runs import slot_key
from workflows.engine.sql.clock import database_now
from workflows.errors import DefinitionMissing, InvalidInput, ScheduleNotFound
from workflows.models import Run, Schedule, ScheduleOrigin
from workflows.validation import check_text

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

BACKFILL_LIMIT = 1000
"""The most slots one backfill starts (one transaction); a longer range is refused."""

UPDATABLE = frozenset(
    {
        "cron",
        "every",
        "tz",
        "input",
        "overlap",
        "catchup_window",
        "jitter",
        "start_at",
        "end_at",
        "note",
    }
)
"""What :func:`update_schedule` changes (the workflow and the key stay: delete and
create for another)."""


def create_schedule_once(
    workflow: str | type[Workflow],
    *,
    key: str,
    cron: str | None = None,
    every: timedelta | None = None,
    tz: str = "UTC",
    input: dict[str, Any] | None = None,
    overlap: str = "skip",
    catchup_window: timedelta = timedelta(hours=1),
    jitter: timedelta | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    paused: bool = False,
    note: str = "",
    user: AnyUser | None = None,
) -> Created[Schedule]:
    """Create a schedule starting runs of ``workflow``; the options as
    :func:`create_schedule`, which returns the schedule alone. ``created`` says whether
    this call made it."""
    name = workflow if isinstance(workflow, str) else workflow.name
    spec = ScheduleSpec.checked(
        workflow=name,
        key=key,
        cron=cron or "",
        every=every,
        tz=tz,
        input={} if input is None else input,
        overlap=overlap,
        catchup_window=catchup_window,
        jitter=jitter,
        start_at=start_at,
        end_at=end_at,
        note=note,
    )
    _check_workflow(spec)
    if not isinstance(paused, bool):
        raise InvalidInput("paused must be true or false", field="paused")
    return rows.create(
        spec, paused=paused, origin=ScheduleOrigin.OPERATOR, now=database_now(), user=user
    )


create_schedule = value_of(
    create_schedule_once,
    "create_schedule",
    """Create a schedule that starts runs of ``workflow`` (a registered name or class) on
    a calendar, and return it (a ``workflows.models.Schedule``).

    Exactly one of ``cron`` (five fields: minute hour day-of-month month day-of-week,
    with ranges, lists, steps and names) and ``every`` (a positive ``timedelta``: slots
    at ``start_at + n * every``, or counted from the Unix epoch without ``start_at``).
    ``tz``: the IANA zone a cron expression's wall-clock times are in. ``input``: each
    run's input. ``overlap``: what a slot does while an earlier run of the schedule has
    not ended (``skip``, ``buffer_one``, ``buffer_all``, ``cancel_other``,
    ``terminate_other``, ``allow_all``). After downtime, slots within
    ``catchup_window`` of now start; older ones are recorded missed. ``jitter`` delays
    each slot's start by up to that much. No slot before ``start_at`` or from
    ``end_at`` on. ``paused`` with ``note``: made paused.

    Idempotent on ``key``: the same specification returns the schedule made before
    (the note aside); another raises :class:`IdempotencyConflict` (change it with
    :func:`update_schedule`). Anything wrong is :class:`InvalidInput` naming the field,
    before anything is written.
    """,
)


def get_schedule(key: str | Schedule) -> Schedule:
    """The schedule ``key`` (or the row given, read again): :class:`ScheduleNotFound`."""
    if isinstance(key, Schedule):
        key = key.key
    # A NUL is in no key, and PostgreSQL refuses it in a query: not found, as any other.
    if not isinstance(key, str) or "\x00" in key:
        raise ScheduleNotFound(f"{key!r} is not a schedule key", key=repr(key))
    schedule = Schedule.objects.filter(key=key).first()
    if schedule is None:
        raise ScheduleNotFound(f"no schedule has the key {key!r}", key=key)
    return schedule


def update_schedule(
    key: str | Schedule, *, user: AnyUser | None = None, **changes: Any
) -> Schedule:
    """Change the schedule ``key``: any of ``cron``/``every`` (giving one clears the
    other), ``tz``, ``input``, ``overlap``, ``catchup_window``, ``jitter``,
    ``start_at``, ``end_at``, ``note``. A changed calendar starts from the first slot
    after now. A schedule declared in code is then the operator's: its class no longer
    updates it."""
    schedule = get_schedule(key)
    unknown = sorted(set(changes) - UPDATABLE)
    if unknown:
        raise InvalidInput(
            f"update_schedule cannot change {unknown[0]!r}; it changes "
            f"{', '.join(sorted(UPDATABLE))}",
            field=unknown[0],
        )
    if changes.get("cron"):
        changes.setdefault("every", None)
    if "every" in changes and changes["every"] is not None:
        changes.setdefault("cron", "")
    values: dict[str, Any] = {
        name: ("" if name == "cron" and value is None else value) for name, value in changes.items()
    }
    spec = replace(schedule.spec(), **values)
    spec.check()
    _check_workflow(spec)
    return rows.update(
        schedule.key, spec, now=database_now(), user=user, origin=ScheduleOrigin.OPERATOR
    )


def pause_schedule(key: str | Schedule, note: str = "", *, user: AnyUser | None = None) -> Schedule:
    """Pause the schedule ``key``: no slot starts until :func:`unpause_schedule`. The
    note says why (shown with it). Pausing a paused schedule changes its note only."""
    check_text(note, field="note", limit=2000)
    return rows.set_paused(get_schedule(key).key, True, note=note, now=database_now(), user=user)


def unpause_schedule(key: str | Schedule, *, user: AnyUser | None = None) -> Schedule:
    """Resume the schedule ``key`` from its next slot after now: slots passed while it
    was paused are not caught up (a backfill starts them). Its note is cleared."""
    return rows.set_paused(get_schedule(key).key, False, note="", now=database_now(), user=user)


def trigger_schedule(key: str | Schedule, *, user: AnyUser | None = None) -> Run:
    """Start one run of the schedule ``key`` now, outside its slot sequence, paused or
    not and whatever its overlap policy; ``run.scheduled_for`` is the trigger's instant."""
    schedule = get_schedule(key)
    return manual.trigger(schedule.key, now=database_now(), user=user)


@dataclass(frozen=True)
class BackfillResult:
    """A backfill's slots: ``started`` runs made now, ``existing`` slots that had their
    run already; with ``dry_run``, ``started`` is empty and ``would_start`` counts."""

    slots: int
    started: list[Run]
    existing: int
    would_start: int = 0


def backfill_schedule(
    key: str | Schedule,
    start: datetime,
    end: datetime,
    *,
    dry_run: bool = False,
    user: AnyUser | None = None,
) -> BackfillResult:
    """Start one run for each slot of the schedule ``key`` in ``[start, end)`` that has
    none, paused or not and regardless of ``start_at`` and the overlap policy.
    Idempotent: the same range again starts nothing new. ``end`` must not be in the
    future, and a range of more than :data:`BACKFILL_LIMIT` slots is refused."""
    schedule = get_schedule(key)
    for name, value in (("start", start), ("end", end)):
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise InvalidInput(f"{name} must be a timezone-aware datetime", field=name)
        check_moment(value, field=name)
    now = database_now()
    if end <= start:
        raise InvalidInput("end must be after start", field="end")
    if end > now:
        raise InvalidInput(
            f"end {end.isoformat()} is in the future; a backfill covers past slots", field="end"
        )
    slots = []
    for slot in slots_between(schedule, start, end):
        slots.append(slot)
        if len(slots) > BACKFILL_LIMIT:
            raise InvalidInput(
                f"the range holds more than {BACKFILL_LIMIT} slots; backfill it in parts",
                field="start",
            )
    keys = [slot_key(schedule.pk, slot) for slot in slots]
    had = set(
        Run.objects.filter(
            workflow_name=schedule.workflow_name, idempotency_key__in=keys
        ).values_list("idempotency_key", flat=True)
    )
    if dry_run:
        return BackfillResult(len(slots), [], len(had), would_start=len(slots) - len(had))
    todo = [slot for slot, k in zip(slots, keys, strict=True) if k not in had]
    done = manual.backfill(schedule.key, todo, now=now, user=user) if todo else manual.Backfilled()
    started = list(Run.objects.filter(pk__in=done.started).order_by("scheduled_for"))
    return BackfillResult(len(slots), started, len(had) + done.existing)


def delete_schedule(key: str | Schedule, *, user: AnyUser | None = None) -> None:
    """Delete the schedule ``key``. Its runs stay (``run.schedule`` empty,
    ``run.scheduled_for`` kept) and so do its events."""
    rows.delete(get_schedule(key).key, user=user)


def next_fire_times(
    schedule: Schedule | ScheduleSpec | str, n: int = 5, after: datetime | None = None
) -> list[datetime]:
    """The next ``n`` slots of ``schedule`` (a schedule, its key, or a spec) after
    ``after`` (default now), as timezone-aware datetimes in UTC (convert with
    ``.astimezone(ZoneInfo(schedule.tz))``). A paused schedule's too: when it would fire."""
    calendar = get_schedule(schedule) if isinstance(schedule, str) else schedule
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 1000:
        raise InvalidInput("n must be an integer from 0 to 1000", field="n")
    if after is not None and (not isinstance(after, datetime) or after.tzinfo is None):
        raise InvalidInput("after must be a timezone-aware datetime", field="after")
    return _next_fire_times(calendar, n, after or database_now())


def _check_workflow(spec: ScheduleSpec) -> None:
    """The workflow must be registered, and the input must fit it, now."""
    try:
        definition = registry.resolve(spec.workflow)
    except DefinitionMissing as exc:
        raise InvalidInput(str(exc), field="workflow") from None
    try:
        definition.check_input(spec.input)
    except InvalidInput as exc:
        raise InvalidInput(f"input: {exc.message}", field="input") from None
