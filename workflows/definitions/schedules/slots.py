"""The instants a schedule's slots fall on, and when each fires.

A cron schedule's slots are the wall-clock times its expression names in its zone,
iterated by ``cronsim`` (which handles daylight saving as Debian's cron does: a local
time that does not exist that day fires once, at the first instant after the gap; a
local time that happens twice fires once, at its first occurrence). An interval's slots
are ``start_at + n * every``, or, without ``start_at``, ``n * every`` counted from the
Unix epoch, so a schedule created twice has the same slots. Every instant returned is
timezone-aware, in UTC.

A slot fires at its instant plus its jitter: an offset below ``jitter`` that every
process computes alike from the schedule and the slot (a digest, not a random draw), so
two sweepers agree when a slot is due.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Protocol

from cronsim import CronSim

from workflows.definitions.schedules.spec import zone

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Calendar(Protocol):
    """What the slot arithmetic reads: a spec, or a stored schedule."""

    @property
    def cron(self) -> str: ...
    @property
    def every(self) -> timedelta | None: ...
    @property
    def tz(self) -> str: ...
    @property
    def start_at(self) -> datetime | None: ...
    @property
    def end_at(self) -> datetime | None: ...


def slots_after(
    calendar: Calendar, after: datetime, *, inclusive: bool = False
) -> Iterator[datetime]:
    """The slots after ``after`` (and at it, when ``inclusive``), in order, within
    ``start_at`` and before ``end_at``."""
    start_at, end_at = calendar.start_at, calendar.end_at
    if start_at is not None and start_at > after:
        after, inclusive = start_at, True
    slots = (
        _cron_slots(calendar, after, inclusive)
        if calendar.cron
        else _interval_slots(calendar, after, inclusive)
    )
    for slot in slots:
        if end_at is not None and slot >= end_at:
            return
        yield slot


def slots_between(calendar: Calendar, start: datetime, end: datetime) -> Iterator[datetime]:
    """The slots in ``[start, end)``, ignoring ``start_at`` and ``end_at`` (a backfill's):
    an interval keeps its anchor, so its slots before ``start_at`` are those it would
    have had."""
    slots = (
        _cron_slots(calendar, start, True)
        if calendar.cron
        else _interval_slots(calendar, start, True)
    )
    for slot in slots:
        if slot >= end:
            return
        yield slot


def next_fire_times(calendar: Calendar, n: int, after: datetime) -> list[datetime]:
    """The next ``n`` slots strictly after ``after``."""
    return list(islice(slots_after(calendar, after), n))


def fire_time(slot: datetime, jitter: timedelta | None, salt: str) -> datetime:
    """When ``slot`` fires: its instant plus an offset below ``jitter`` derived from
    ``salt`` (the schedule's key) and the slot."""
    if not jitter:
        return slot
    digest = hashlib.sha256(f"{salt}@{slot.isoformat()}".encode()).digest()
    span = int(jitter.total_seconds() * 1000)
    return slot + timedelta(milliseconds=int.from_bytes(digest[:8], "big") % max(span, 1))


def _cron_slots(calendar: Calendar, after: datetime, inclusive: bool) -> Iterator[datetime]:
    tz = zone(calendar.tz)
    # cronsim yields the matches strictly after its start; a start a microsecond
    # earlier makes ``after`` itself a candidate. It works in whole minutes.
    start = after - timedelta(microseconds=1) if inclusive else after
    for local in CronSim(calendar.cron, start.astimezone(tz)):
        yield local.astimezone(UTC)


def _interval_slots(calendar: Calendar, after: datetime, inclusive: bool) -> Iterator[datetime]:
    every = calendar.every
    assert every is not None
    anchor = calendar.start_at or EPOCH
    step = every.total_seconds()
    elapsed = (after - anchor).total_seconds()
    slot = anchor + int(elapsed // step) * every
    while slot < after or (slot == after and not inclusive):
        slot += every
    while True:
        yield slot.astimezone(UTC)
        slot += every
