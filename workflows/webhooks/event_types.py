"""The event types an endpoint may subscribe to, and the history events they come from.

A webhook type is a history event type (``run.completed``, ``step.failed``,
``flow.member_added``) except ``gate.waiting``, which is the ``step.waiting`` event of a
gate: the same choice as the hooks (:mod:`workflows.hooks`), so an integration sees the
same moments either way. Every event of a flow is a webhook type: a flow is built while
it runs, and a system watching it wants each change to its graph as well as its end.
So is every event of a run schedule: a slot skipped or missed is what an operator
alerts on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError

from workflows.status import FLOW_FINAL, RUN_FINAL, NodeKind

WILDCARD = "*"

FLOW_EVENT_TYPES: tuple[str, ...] = (
    "flow.created",
    "flow.member_added",
    "flow.edge_added",
    "flow.join_changed",
    "flow.member_unblocked",
    "flow.dependency_failed",
    "flow.sealed",
    "flow.member_healed",
    "flow.reopened",
    *sorted(f"flow.{status}" for status in FLOW_FINAL),
)
"""The history events of a flow (:meth:`~workflows.engine.events.EventLog.add_to_flow`):
of the whole flow, or of one member (the event's run set)."""

SCHEDULE_EVENT_TYPES: tuple[str, ...] = (
    "schedule.created",
    "schedule.updated",
    "schedule.paused",
    "schedule.unpaused",
    "schedule.deleted",
    "schedule.fired",
    "schedule.skipped",
    "schedule.buffered",
    "schedule.missed",
)
"""The history events of a run schedule (``workflows.engine.schedules.history``): its
changes, and each slot's fate (a run started, skipped or buffered by the overlap policy,
missed for being older than the catch-up window)."""

WEBHOOK_EVENT_TYPES: tuple[str, ...] = (
    "run.started",
    *sorted(f"run.{status}" for status in RUN_FINAL),
    "step.completed",
    "step.failed",
    "gate.waiting",
    "gate.decided",
    "gate.overridden",
    "compensation.failed",
    *FLOW_EVENT_TYPES,
    *SCHEDULE_EVENT_TYPES,
)

# The history event types worth reading when recording deliveries.
SOURCE_EVENT_TYPES: frozenset[str] = frozenset(
    {"step.waiting", *(name for name in WEBHOOK_EVENT_TYPES if name != "gate.waiting")}
)


def webhook_type(event_type: str, payload: dict[str, Any]) -> str | None:
    """The webhook type of a history event, or None when no endpoint can receive it."""
    if event_type == "step.waiting":
        return "gate.waiting" if payload.get("reason") == NodeKind.GATE else None
    return event_type if event_type in SOURCE_EVENT_TYPES else None


def subscribed(event_types: Iterable[str], webhook_event_type: str) -> bool:
    """Whether an endpoint subscribed to ``event_types`` receives ``webhook_event_type``."""
    return any(name in (WILDCARD, webhook_event_type) for name in event_types)


def validate_event_types(value: Any) -> None:
    """Refuse anything but a non-empty list of known event types (or ``"*"``)."""
    if not isinstance(value, list) or not value:
        raise ValidationError(
            "Choose at least one event type (or %(wildcard)s for all of them).",
            code="no_event_types",
            params={"wildcard": WILDCARD},
        )
    unknown = [name for name in value if name not in (WILDCARD, *WEBHOOK_EVENT_TYPES)]
    if unknown:
        raise ValidationError(
            "Unknown event type(s): %(unknown)s. Known: %(known)s, or %(wildcard)s for all.",
            code="unknown_event_type",
            params={
                "unknown": ", ".join(map(str, unknown)),
                "known": ", ".join(WEBHOOK_EVENT_TYPES),
                "wildcard": WILDCARD,
            },
        )
