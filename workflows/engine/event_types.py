"""Every type of event the history holds: the one list a reader's filter is checked
against (an event consumer's ``kinds``).

The engine writes each type in the transition that makes it true; most are written
literally, the rest are made from a status or a work kind (``run.<status>``,
``flow.<status>``, ``<kind>.ready`` ...), so they are made here the same way.
``tests/unit/test_event_types.py`` reads the engine's source and fails on a literal type
missing from this list.
"""

from __future__ import annotations

from workflows.engine.work_kinds import WORK_KINDS
from workflows.status import FlowStatus, RunStatus

__all__ = ["EVENT_TYPES"]

_WRITTEN_LITERALLY = (
    "child.started",
    "compensation.recorded",
    "compensations.retried",
    "compensations.skipped",
    "fanout.started",
    "flow.created",
    "flow.dependency_failed",
    "flow.edge_added",
    "flow.join_changed",
    "flow.member_added",
    "flow.member_healed",
    "flow.member_unblocked",
    "flow.reopened",
    "gate.claimed",
    "gate.decided",
    "gate.overridden",
    "gate.unclaimed",
    "item.returned",
    "items.reset",
    "items.skipped",
    "lease.expired",
    "lease.lost",
    "lease.revoked",
    "loop.exhausted",
    "loop.iterated",
    "run.business_key_set",
    "run.cancel_requested",
    "run.deadline_exceeded",
    "run.dequeued",
    "run.dismissed",
    "run.pause_requested",
    "run.priority_changed",
    "run.repaired",
    "run.rerun_requested",
    "run.resume_requested",
    "run.resumed",
    "run.started",
    "run.retry_requested",
    "run.tags_set",
    "run.terminate_requested",
    "run.variables_set",
    "run.undismissed",
    "schedule.buffered",
    "schedule.created",
    "schedule.deleted",
    "schedule.fired",
    "schedule.missed",
    "schedule.paused",
    "schedule.skipped",
    "schedule.unpaused",
    "schedule.updated",
    "signal.received",
    "step.awaiting",
    "step.cancelled",
    "step.resumed",
    "step.retried",
    "step.skipped",
    "step.timed_out",
    "step.waiting",
    "timer.fired",
    "unit.failed_by_operator",
)
# What happens to any leased unit (a step, an item, a compensation) on its way.
_UNIT_EVENTS = (
    "ready",
    "started",
    "completed",
    "failed",
    "retry_scheduled",
    "redispatched",
    "held",
)

EVENT_TYPES: frozenset[str] = frozenset(
    {
        *_WRITTEN_LITERALLY,
        *(f"run.{status}" for status in RunStatus),
        *(f"flow.{status}" for status in FlowStatus),
        *(f"{kind.name}.{event}" for kind in WORK_KINDS for event in _UNIT_EVENTS),
    }
)
