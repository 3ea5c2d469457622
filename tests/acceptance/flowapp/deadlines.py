"""The deadline acceptance workflow and its handlers: a run with a deadline of a few
seconds books something (compensable), then lingers in a step that heartbeats until its
lease is taken. At the deadline the run fails, the lingering attempt loses its lease and
stops at its next heartbeat, and the booking is undone."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from tests.acceptance.flowapp.handlers import COMPENSATED, RECORDED, output, record_call
from workflows import LeaseLost, Retry, Task, Workflow
from workflows.context import Context

HERE = "tests.acceptance.flowapp.deadlines"
# How long a lingering attempt heartbeats at most: below the queue's task timeout (10 s),
# so django-q2 never kills it, and well past the run's deadline.
LINGER_AT_MOST_SECONDS = 8.0
HEARTBEAT_EVERY_SECONDS = 0.2


def linger(ctx: Context) -> dict[str, Any]:
    """Heartbeat until the lease is taken (the run's deadline), then stop."""
    record_call(ctx)
    end = time.monotonic() + LINGER_AT_MOST_SECONDS
    while time.monotonic() < end:
        time.sleep(HEARTBEAT_EVERY_SECONDS)
        try:
            ctx.heartbeat()
        except LeaseLost:
            record_call(ctx, note="stopped: lease lost")
            raise
    record_call(ctx, note="lingered to the end")
    return output(ctx)


class Deadline(Workflow):
    """Book, then linger past the run's deadline of four seconds."""

    name = "acceptance_deadline"
    deadline = timedelta(seconds=4)

    book = Task(RECORDED, compensate=COMPENSATED, timeout=timedelta(seconds=2))
    linger = Task(f"{HERE}.linger", timeout=timedelta(seconds=2), retry=Retry(max_attempts=1))
    then = Task(RECORDED, timeout=timedelta(seconds=2))
