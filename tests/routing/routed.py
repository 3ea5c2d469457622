"""The workflow the routing test runs: a retry, a durable timer and three steps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from workflows import Retry, Sleep, Task, Workflow


def flaky(ctx: Any) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return "done"


class Routed(Workflow):
    name = "routing_routed"
    first = Task("tests.routing.routed.flaky", retry=Retry(max_attempts=2))
    nap = Sleep(timedelta(seconds=5))
    last = Task("tests.routing.routed.flaky", retry=Retry(max_attempts=2))
