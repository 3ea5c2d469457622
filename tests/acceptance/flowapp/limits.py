"""Workflows and handlers of the limit acceptance tests (``test_limits_*.py``).

Imported by the app's ``ready()`` so that every worker process registers them, like the
workflows of ``flows.py``. Leases are two seconds long, so that a killed worker's
attempt is reclaimed within a test; a handler that blocks heartbeats, so that only a
kill (never a slow test) lets its lease run out.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from tests.acceptance.flowapp.flows import LEASE, PATIENT, task
from tests.acceptance.flowapp.handlers import (
    DEFAULT_HOLD_SECONDS,
    HEARTBEAT_EVERY_SECONDS,
    RELEASE_DIR,
    apply_effect,
    output,
    record_call,
    var_path,
)
from workflows import Retry, Task, Workflow
from workflows.context import Context

LIMITS = "tests.acceptance.flowapp.limits"
# The rate limit of ``acceptance_rate``: five starts in any two seconds.
RATE_LIMIT = "5/2s"


def customer_key(ctx: Context) -> str:
    """The concurrency key: the run's customer."""
    return f"customer:{ctx.input['customer']}"


def hold_alive(ctx: Context) -> dict[str, Any]:
    """Block the attempts listed in ``input["hold_attempts"]`` until the test releases the
    run (``Stack.release``), heartbeating meanwhile, then make the effect.

    Unlike ``handlers.hold`` the attempt keeps its lease while it blocks: it is reclaimed
    only if its worker dies. Blocks at most ``DEFAULT_HOLD_SECONDS``, below the queue's
    task timeout, so django-q2 never kills it.
    """
    record_call(ctx)
    if ctx.attempt in ctx.input.get("hold_attempts", []):
        deadline = time.monotonic() + DEFAULT_HOLD_SECONDS
        while not var_path(RELEASE_DIR, ctx.run_id).exists() and time.monotonic() < deadline:
            time.sleep(HEARTBEAT_EVERY_SECONDS / 5)
            ctx.heartbeat()
    apply_effect(ctx)
    return output(ctx)


class PerCustomer(Workflow):
    """One step that at most two attempts per customer may run at once."""

    name = "acceptance_per_customer"

    charge = task("work", concurrency_key=customer_key, max_concurrent=2)


class OnePerCustomer(Workflow):
    """One step that one attempt per customer may run at a time; it blocks until released."""

    name = "acceptance_one_per_customer"

    charge = Task(
        f"{LIMITS}.hold_alive",
        timeout=LEASE,
        retry=Retry(max_attempts=3, initial_interval=timedelta(milliseconds=200)),
        concurrency_key=customer_key,
        max_concurrent=1,
    )


class RateLimited(Workflow):
    """One step started at most ``RATE_LIMIT`` times, across every worker."""

    name = "acceptance_rate"

    call = task("work", rate_limit=RATE_LIMIT)


class Ranked(Workflow):
    """One step; the run's priority orders its claim (``start_run(..., priority=N)``)."""

    name = "acceptance_ranked"

    rank = Task(f"{LIMITS}.hold_alive", timeout=LEASE, retry=PATIENT)
