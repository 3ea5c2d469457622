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
from workflows.engine.advance import Advancer, error_from_exception
from workflows.engine.lease import Lease
from workflows.engine.loops.iterations import start_next_poll
from workflows.engine.nodes.loop import exhausted_error
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.timers import fires
from workflows.status import StepStatus, TimerKind


def poll_again(advancer: Advancer, lease: Lease) -> bool:
    """Whether the polling task of ``lease``, whose iteration just completed, was taken
    care of here (parked for its next iteration, or failed): the caller then releases
    nothing downstream. ``False``: it is done, downstream steps go on."""
    node = lease.node
    assert isinstance(node, Task) and node.repeat_until is not None
    assert node.max_iterations is not None, "a poll declares its bound (repeat_problems)"
    row = step_row(lease.step_id)
    run = advancer.run
    try:
        done = bool(node.repeat_until(advancer.context_for(row)))
    except Exception as exc:
        error = error_from_exception(exc, code="condition_error")
        _fail(advancer, row, error)
        advancer.fail(row.name, error)
        return True
    if done:
        return False
    if row.iteration >= node.max_iterations:
        advancer.events.add(
            run.pk,
            "loop.exhausted",
            step_id=row.pk,
            iterations=row.iteration,
            on_exhausted=node.on_exhausted,
        )
        if node.on_exhausted == "continue":
            return False
        error = exhausted_error(row.name, row.iteration, "poll")
        _fail(advancer, row, error)
        advancer.fail_run(error)
        return True
    start_next_poll(row, advancer.workflow)
    due = timezone.now() + (node.every or timedelta(0))
    advancer.park(row, TimerKind.REPEAT, due, reason="repeat", iteration=row.iteration)
    advancer.forget_context()
    return True


def _fail(advancer: Advancer, row: StepRow, error: dict[str, object]) -> None:
    advancer.move(row, StepStatus.FAILED, error=error, finished_at=db_now())
    advancer.events.add(advancer.run.pk, "step.failed", step_id=row.pk, code=error["code"])


@fires(TimerKind.REPEAT)
def repeat(advancer: Advancer, row: StepRow) -> None:
    """The sleep between two iterations of a poll ended: run its next one."""
    node = advancer.workflow.nodes[row.name]
    Advancer.entry_of(node)(advancer, row, node)
