"""What a schedule says, checked whole: a cron expression or an interval, its zone, the
input of its runs, the overlap policy and the windows.

A :class:`ScheduleSpec` is built by ``create_schedule`` (from its arguments), by
``Schedule.cron(...)`` / ``Schedule.every(...)`` in a workflow's ``schedules`` list and
by the API's serializer: one check, one set of messages, each naming its field, all
before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from workflows.errors import InvalidInput
from workflows.validation import check_json, check_text


class Overlap(StrEnum):
    """What a slot does when a run of its schedule started earlier has not ended."""

    SKIP = "skip"
    """The slot starts nothing; it is counted and recorded as skipped (the default)."""
    BUFFER_ONE = "buffer_one"
    """The slot waits and starts once the earlier runs end; at most one slot waits, a
    later one is skipped."""
    BUFFER_ALL = "buffer_all"
    """Every such slot waits, and they start one after another as each run ends."""
    CANCEL_OTHER = "cancel_other"
    """The earlier runs are cancelled (compensating), and the slot starts once they end."""
    TERMINATE_OTHER = "terminate_other"
    """The earlier runs are terminated (no compensation), and the slot starts at once."""
    ALLOW_ALL = "allow_all"
    """The slot starts beside the earlier runs."""


OVERLAP_POLICIES = tuple(policy.value for policy in Overlap)

MAX_KEY_LENGTH = 200
"""The longest schedule key (the model's column)."""

DEFAULT_CATCHUP_WINDOW = timedelta(hours=1)

FIRST_YEAR, LAST_YEAR = 1900, 8999
"""The years a schedule's bounds and a backfill's range may name."""


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule's specification: everything but its state (pause, counters, next slot).

    Built with :meth:`checked` from loose arguments, or by ``Schedule.cron`` /
    ``Schedule.every`` (:mod:`.declared`) in a workflow's ``schedules`` list, where
    ``workflow`` and ``key`` may be empty: the class fills in its name, and the name and
    the expression make a key (:meth:`with_default_key`).
    """

    workflow: str
    key: str = ""
    cron: str = ""
    every: timedelta | None = None
    tz: str = "UTC"
    input: dict[str, Any] = field(default_factory=dict)
    overlap: str = Overlap.SKIP.value
    catchup_window: timedelta = DEFAULT_CATCHUP_WINDOW
    jitter: timedelta | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    note: str = ""

    @classmethod
    def checked(cls, **values: Any) -> ScheduleSpec:
        """The spec of ``values`` (the fields by name), or :class:`InvalidInput` naming the
        first field that is wrong."""
        spec = cls(**{name: value for name, value in values.items() if value is not None})
        spec.check()
        return spec

    def check(self, *, declared: bool = False) -> None:
        """Raise :class:`InvalidInput` naming the first wrong field."""
        if not declared:
            _text(self.workflow, field="workflow", limit=200)
            if not self.workflow:
                raise InvalidInput("workflow is required", field="workflow")
        if not (declared and self.key == ""):
            _check_key(self.key)
        has_cron, has_every = bool(self.cron), self.every is not None
        if has_cron == has_every:
            raise InvalidInput(
                "give exactly one of cron (an expression) and every (an interval)",
                field="cron" if has_cron else "every",
            )
        if has_cron:
            _check_cron(self.cron)
        else:
            _check_interval(self.every, field="every", positive=True)
        zone(self.tz)
        if not isinstance(self.input, dict):
            raise InvalidInput("input must be a JSON object", field="input")
        try:
            check_json(self.input, field="input")
        except InvalidInput as exc:
            raise InvalidInput(exc.message, field="input") from None
        if self.overlap not in OVERLAP_POLICIES:
            raise InvalidInput(
                f"unknown overlap policy {self.overlap!r}; one of {', '.join(OVERLAP_POLICIES)}",
                field="overlap",
            )
        _check_interval(self.catchup_window, field="catchup_window", positive=False)
        if self.jitter is not None:
            _check_interval(self.jitter, field="jitter", positive=False)
        for name in ("start_at", "end_at"):
            _check_instant(getattr(self, name), field=name)
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise InvalidInput("end_at must be after start_at", field="end_at")
        _text(self.note, field="note", limit=2000)

    def with_default_key(self, workflow: str) -> ScheduleSpec:
        """The declared spec, for ``workflow``, keyed ``<workflow>:<cron or interval>``
        unless it has a key of its own."""
        key = self.key or f"{workflow}:{self.cron or _interval_text(self.every)}"
        spec = replace(self, workflow=workflow, key=key)
        spec.check()
        return spec

    @property
    def tzinfo(self) -> ZoneInfo:
        return zone(self.tz)

    def fingerprint(self) -> str:
        """The digest that says whether two creations with one key asked the same thing
        (the note, a remark, is left out)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "note"}
        text = json.dumps(values, sort_keys=True, default=_plain)
        return hashlib.sha256(text.encode()).hexdigest()


def zone(name: Any) -> ZoneInfo:
    """The time zone ``name`` (an IANA name), or :class:`InvalidInput` on ``tz``."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise InvalidInput(f"unknown time zone {name!r}", field="tz")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(
            f"unknown time zone {name!r}; an IANA name such as 'Europe/Berlin'", field="tz"
        ) from None


def _text(value: Any, *, field: str, limit: int) -> None:
    """:func:`check_text`, its refusal naming ``field`` in its details."""
    try:
        check_text(value, field=field, limit=limit)
    except InvalidInput as exc:
        raise InvalidInput(exc.message, field=field) from None


def _check_key(key: Any) -> None:
    _text(key, field="key", limit=MAX_KEY_LENGTH)
    if not key.strip() or key != key.strip() or "/" in key:
        raise InvalidInput(
            f"key {key!r} must be non-empty, without surrounding spaces or '/'", field="key"
        )


def _check_cron(expression: Any) -> None:
    if not isinstance(expression, str) or "\x00" in expression:
        raise InvalidInput("cron must be a string such as '0 2 * * *'", field="cron")
    if len(expression.split()) != 5:
        raise InvalidInput(
            f"cron {expression!r} must have five fields: minute hour day-of-month month "
            "day-of-week",
            field="cron",
        )
    try:
        CronSim(expression, datetime(2000, 1, 1))
    except (CronSimError, ValueError, KeyError, IndexError) as exc:
        raise InvalidInput(f"cron {expression!r} is not valid: {exc}", field="cron") from None


def _check_interval(value: Any, *, field: str, positive: bool) -> None:
    if not isinstance(value, timedelta):
        raise InvalidInput(f"{field} must be a duration", field=field)
    if value < timedelta(0) or (positive and value <= timedelta(0)):
        raise InvalidInput(
            f"{field} must be {'positive' if positive else 'zero or more'}, got {value}",
            field=field,
        )
    if value > timedelta(days=3660):
        raise InvalidInput(f"{field} must be at most ten years, got {value}", field=field)


def _check_instant(value: Any, *, field: str) -> None:
    if value is None:
        return
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInput(f"{field} must be a timezone-aware datetime", field=field)
    check_moment(value, field=field)


def check_moment(value: datetime, *, field: str) -> None:
    """Refuse a moment outside the years slots are computed in (1900 to 8999): the
    arithmetic near the ends of the calendar would overflow."""
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise InvalidInput(
            f"{field} must be between the years {FIRST_YEAR} and {LAST_YEAR}", field=field
        )


def _interval_text(every: timedelta | None) -> str:
    return f"every {int(every.total_seconds())}s" if every is not None else ""


def _plain(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(type(value).__name__)
