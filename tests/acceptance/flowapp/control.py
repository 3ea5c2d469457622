"""Workflows of the revoke and cooperative-cancel acceptance tests: a handler that keeps
heartbeating (a worker wedged in a loop, or long work that checks in), recording what
its heartbeats told it.

``spin`` heartbeats every :data:`HEARTBEAT_EVERY_SECONDS` for at most
:data:`SPIN_AT_MOST_SECONDS` (below the queue's task timeout, so django-q2 never kills
it). Each note it records is a row the tests read:

- ``revoked``: its heartbeat raised ``LeaseLost`` (not ``RunCancelled``); like a handler
  that ignores the warning, it then returns a result anyway, which the engine refuses;
- ``stopped by RunCancelled``: its heartbeat raised ``RunCancelled``; it stops there;
- ``heartbeat went on after cancel_requested``: it saw ``ctx.cancel_requested`` true
  and its next heartbeat still succeeded (the tests assert this never happens);
- ``spun to the end``: nothing stopped it.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from tests.acceptance.flowapp.handlers import COMPENSATED, RECORDED, output, record_call
from workflows import LeaseLost, Retry, RunCancelled, Task, Workflow
from workflows.context import Context

HERE = "tests.acceptance.flowapp.control"
SPIN_AT_MOST_SECONDS = 8.0
HEARTBEAT_EVERY_SECONDS = 0.2


def spin(ctx: Context) -> dict[str, Any]:
    """Heartbeat in a loop on the attempts ``input["spin_attempts"]`` (default: the first);
    other attempts return at once."""
    record_call(ctx)
    if ctx.attempt not in ctx.input.get("spin_attempts", [1]):
        return output(ctx)
    end = time.monotonic() + SPIN_AT_MOST_SECONDS
    while time.monotonic() < end:
        time.sleep(HEARTBEAT_EVERY_SECONDS)
        asked = ctx.cancel_requested
        try:
            ctx.heartbeat()
        except RunCancelled:
            record_call(ctx, note="stopped by RunCancelled")
            raise
        except LeaseLost:
            record_call(ctx, note="revoked")
            return output(ctx)  # a result the engine must refuse
        if asked:
            record_call(ctx, note="heartbeat went on after cancel_requested")
    record_call(ctx, note="spun to the end")
    return output(ctx)


class Wedged(Workflow):
    """One attempt allowed: the revoke must give it back for the step to run again."""

    name = "acceptance_wedged"

    spin = Task(f"{HERE}.spin", timeout=timedelta(seconds=2), retry=Retry(max_attempts=1))
    then = Task(RECORDED, timeout=timedelta(seconds=2))


class Cancellable(Workflow):
    """Reserve (compensable), then spin until the run is cancelled."""

    name = "acceptance_cancellable"

    reserve = Task(RECORDED, compensate=COMPENSATED, timeout=timedelta(seconds=2))
    spin = Task(f"{HERE}.spin", timeout=timedelta(seconds=2), retry=Retry(max_attempts=3))
