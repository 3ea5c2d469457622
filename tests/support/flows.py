"""Flows for the tests whose subject is the flow, not what its members do: members (a
step that works, or fails for good when its step is in ``handlers.BROKEN``; one that fails
for good; one that waits for the signal ``go``; one held at a gate; one that does nothing
in one attempt; one that answers its input's ``value``), a member added to a flow, a
member's step finished by hand, and the statuses a test reads back."""

from __future__ import annotations

from typing import Any

import workflows
from tests.support.handlers import BOOM, NOOP, WORK
from workflows import Gate, PermanentError, Retry, Task, WaitForSignal, Workflow
from workflows.engine import claim_step, complete_work, fail_attempt
from workflows.models import Flow, Run, Step
from workflows.status import StepStatus

ONCE = Retry(max_attempts=1)
ECHO = f"{__name__}.echo"


def echo(ctx: Any) -> Any:
    return ctx.input.get("value")


class Work(Workflow):
    name = "flow_member_work"
    work = Task(WORK)


class Broken(Workflow):
    name = "flow_member_broken"
    boom = Task(BOOM, retry=ONCE)


class Waits(Workflow):
    name = "flow_member_waits"
    go = WaitForSignal("go")


class Held(Workflow):
    """A member that waits at a gate, so that it has started and not ended."""

    name = "flow_member_held"
    approve = Gate(prompt="go?")


class Unit(Workflow):
    """A member of one step that does nothing, in one attempt."""

    name = "flow_member_unit"
    work = Task(NOOP, retry=ONCE)


class Echo(Workflow):
    """A member of one step whose output is its input's ``value``."""

    name = "flow_member_echo"
    answer = Task(ECHO, retry=ONCE)


def add(flow: Flow, member: str, after: tuple[str, ...] = (), join: Any = "all") -> Run:
    """Add ``member``, a :class:`Unit`, to ``flow`` after the members ``after``."""
    return workflows.add_to_flow(flow, Unit, {}, member=member, after=after, join=join)


def finish(run: Run, *, fail: bool = False) -> None:
    """Run the member's ready step now: complete it (the member completes), or fail it
    for good (the member fails)."""
    step = Step.objects.get(run=run, status=StepStatus.READY)
    lease = claim_step(step.pk, "test")
    if fail:
        fail_attempt(lease, PermanentError("failed on purpose"))
    else:
        complete_work(lease, {"done": step.name})


def status(run: Run) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


def statuses(flow: Flow) -> dict[str, str]:
    """Each member's run status, by member name."""
    return dict(Run.objects.filter(flow=flow).values_list("flow_member__name", "status"))


def flow_status(flow: Flow) -> str:
    return Flow.objects.values_list("status", flat=True).get(pk=flow.pk)
