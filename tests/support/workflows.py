"""Small workflows no test is about: what a test of flows, of an API surface or of a verb
starts when any run will do. A step that works (its output is its name; it fails for
good when its step is in ``handlers.BROKEN``), one that fails for good, one that waits for
the signal ``go``, one held at a gate, one that does nothing in one attempt, and one that
answers its input's ``value``."""

from __future__ import annotations

from typing import Any

from tests.support.handlers import BOOM, NOOP, WORK
from workflows import Gate, Retry, Task, WaitForSignal, Workflow

ONCE = Retry(max_attempts=1)
ECHO = f"{__name__}.echo"


def echo(ctx: Any) -> Any:
    return ctx.input.get("value")


class Work(Workflow):
    name = "support_work"
    work = Task(WORK)


class Broken(Workflow):
    name = "support_broken"
    boom = Task(BOOM, retry=ONCE)


class Waits(Workflow):
    name = "support_waits"
    go = WaitForSignal("go")


class Held(Workflow):
    """Waits at a gate, so that it has started and not ended."""

    name = "support_held"
    approve = Gate(prompt="go?")


class Unit(Workflow):
    """One step that does nothing, in one attempt."""

    name = "support_unit"
    work = Task(NOOP, retry=ONCE)


class Echo(Workflow):
    """One step whose output is its input's ``value``."""

    name = "support_echo"
    answer = Task(ECHO, retry=ONCE)
