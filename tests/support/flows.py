"""Members for the tests of flows whose subject is the flow, not what its members do: a
run of one step that works (or fails for good when its step is in ``handlers.BROKEN``),
one that fails for good, one that waits for the signal ``go`` and one held at a gate."""

from __future__ import annotations

from tests.support.handlers import BOOM, WORK
from workflows import Gate, Retry, Task, WaitForSignal, Workflow


class Work(Workflow):
    name = "flow_member_work"
    work = Task(WORK)


class Broken(Workflow):
    name = "flow_member_broken"
    boom = Task(BOOM, retry=Retry(max_attempts=1))


class Waits(Workflow):
    name = "flow_member_waits"
    go = WaitForSignal("go")


class Held(Workflow):
    """A member that waits at a gate, so that it has started and not ended."""

    name = "flow_member_held"
    approve = Gate(prompt="go?")
