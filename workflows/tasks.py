"""django-q2 entry points: thin wrappers around the runner, the scanners and the
webhook sender.

Queue messages only say "work on step N" (or item, or compensation); the engine owns
leases, attempts and backoff, so these functions never raise for work that is already
taken or finished.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from workflows.engine.work_kinds import COMPENSATION, ITEM, STEP
from workflows.webhooks.sender import send_endpoint
from workflows.workers.runner import execute
from workflows.workers.scanners import fire_due_timers, recover as run_scanners
from workflows.workers.schedule_slots import fire_due_schedules


def run_step(step_id: int) -> int:
    """Run a ready step, the work it releases and then other ready steps of its route,
    while the chain budget lasts."""
    return execute(STEP, step_id, pull=True)


def run_item(item_id: int) -> int:
    """Run a ready fan-out item, the next items it releases and then other ready items
    of its route."""
    return execute(ITEM, item_id, pull=True)


def run_compensation(record_id: int) -> int:
    """Run a ready compensation."""
    return execute(COMPENSATION, record_id)


def send_webhooks(endpoint_id: int) -> int:
    """Send an endpoint's due webhook deliveries, in order (a nudge: a duplicate finds
    the head claimed or not due and sends nothing)."""
    return send_endpoint(endpoint_id)


def fire_timers() -> dict[str, int]:
    """Scheduled fallback for deployments without the sweeper process: due timers, and
    the slots of schedules (which then start up to a minute late)."""
    fired = asdict(fire_due_timers())
    slots = asdict(fire_due_schedules())
    return {**fired, **{f"schedules_{name}": count for name, count in slots.items()}}


def recover() -> dict[str, Any]:
    """Run every recovery scanner once (scheduled every minute)."""
    return {name: asdict(result) for name, result in run_scanners().items()}
