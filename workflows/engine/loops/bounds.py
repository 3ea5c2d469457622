"""A loop's bound: what a ``Loop`` node or a polling task does when it has run
``max_iterations`` rounds and its condition still asks for another (``on_exhausted``:
fail the step and its run with ``max_iterations_exceeded``, or let it complete).

Both forms run out the same way, so the loop node (:mod:`workflows.engine.nodes.loop`)
and the poll (:mod:`.polling`) share :func:`ran_out`; a retry recognises a step that
ran out by :data:`MAX_ITERATIONS_EXCEEDED`.
"""

from __future__ import annotations

from typing import Any

from workflows.engine.advance import Advancer
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow
from workflows.status import StepStatus

# The error code of a run whose loop (or poll) ran out of iterations.
MAX_ITERATIONS_EXCEEDED = "max_iterations_exceeded"


def exhausted_error(step: str, iterations: int, what: str) -> dict[str, Any]:
    """The run's error when a loop (or a poll) ran ``iterations`` times and would go on."""
    return {
        "code": MAX_ITERATIONS_EXCEEDED,
        "message": f"{what} {step!r} ran {iterations} iterations (its max_iterations) "
        "and its condition still asks for another",
        "step": step,
        "iterations": iterations,
    }


def ran_out(advancer: Advancer, row: StepRow, on_exhausted: str, what: str) -> bool:
    """Record that the loop (or poll, ``what``) of ``row`` ran out of iterations with
    its condition asking for another. ``on_exhausted="fail"`` fails the step and its run
    with ``max_iterations_exceeded`` (``True``); ``"continue"`` leaves the step for the
    caller to complete (``False``)."""
    run = advancer.run
    advancer.events.add(
        run.pk,
        "loop.exhausted",
        step_id=row.pk,
        iterations=row.iteration,
        on_exhausted=on_exhausted,
    )
    if on_exhausted == "continue":
        return False
    error = exhausted_error(row.name, row.iteration, what)
    advancer.move(row, StepStatus.FAILED, error=error, finished_at=db_now())
    advancer.events.add(run.pk, "step.failed", step_id=row.pk, code=error["code"])
    advancer.fail_run(error)
    return True
