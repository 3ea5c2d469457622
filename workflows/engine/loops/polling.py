"""Polling tasks (``Task(repeat_until=..., every=..., max_iterations=...)``): a one-step
loop with a durable sleep between iterations.

When an iteration of a polling task completes (its output and its compensation record
written as any task's), :func:`poll_again` asks ``repeat_until`` in the same
transition. Done: the step stays completed and the run goes on. Not done: the iteration
is archived, the step starts its next one (new generation, fresh attempts) and waits
``waiting`` on a ``repeat`` timer due ``every`` from now; the timer entering the task
again is :func:`repeat`. Past ``max_iterations`` it fails the run with
``max_iterations_exceeded``, or, with ``on_exhausted="continue"``, completes.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from workflows.definitions import Task
from workflows.engine.advance import Advancer
from workflows.engine.lease import Lease
from workflows.engine.loops.bounds import ran_out
from workflows.engine.loops.iterations import start_next_poll
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.timers import fires
from workflows.status import TimerKind


def poll_again(advancer: Advancer, lease: Lease) -> bool:
    """Whether the polling task of ``lease``, whose iteration just completed, was taken
    care of here (parked for its next iteration, or failed): the caller then releases
    nothing downstream. ``False``: it is done, downstream steps go on."""
    node = lease.node
    assert isinstance(node, Task) and node.repeat_until is not None
    assert node.max_iterations is not None, "a poll declares its bound (repeat_problems)"
    row = step_row(lease.step_id)
    try:
        done = bool(node.repeat_until(advancer.context_for(row)))
    except Exception as exc:
        advancer.fail_entering(row, exc, "condition_error")
        return True
    if done:
        return False
    if row.iteration >= node.max_iterations:
        return ran_out(advancer, row, node.on_exhausted, "poll")
    start_next_poll(row, advancer.workflow)
    due = timezone.now() + (node.every or timedelta(0))
    advancer.park(row, TimerKind.REPEAT, due, reason="repeat", iteration=row.iteration)
    advancer.forget_context()
    return True


@fires(TimerKind.REPEAT)
def repeat(advancer: Advancer, row: StepRow) -> None:
    """The sleep between two iterations of a poll ended: run its next one."""
    node = advancer.workflow.nodes[row.name]
    Advancer.entry_of(node)(advancer, row, node)
