"""Flows for the tests whose subject is the flow, not what its members do: a member added
to a flow, a member's step finished by hand, and the statuses a test reads back. The
members are the small workflows of :mod:`tests.support.workflows`."""

from __future__ import annotations

from typing import Any

import workflows
from tests.support.workflows import Unit
from workflows import PermanentError
from workflows.engine import claim_step, complete_work, fail_attempt
from workflows.models import Flow, Run, Step
from workflows.status import StepStatus


def add(flow: Flow, member: str, after: tuple[str, ...] = (), join: Any = "all") -> Run:
    """Add ``member``, a :class:`~tests.support.workflows.Unit`, to ``flow`` after the
    members ``after``."""
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
