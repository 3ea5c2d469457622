"""django-q2 entry points: thin wrappers around the runner and the scanners.

Queue messages only say "work on step N"; the engine owns leases, attempts and backoff,
so these functions never raise for a step that is already taken or finished.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from workflows.runner import execute_step
from workflows.scanners import fire_due_timers
from workflows.scanners import recover as run_scanners


def run_step(step_id: int) -> int:
    """Run a ready step (and the steps it releases, while the chain budget lasts)."""
    return execute_step(step_id)


def fire_timers() -> dict[str, int]:
    """Scheduled fallback for deployments without the sweeper process."""
    return asdict(fire_due_timers())


def recover() -> dict[str, Any]:
    """Run every recovery scanner once (scheduled every minute)."""
    return {name: asdict(result) for name, result in run_scanners().items()}
