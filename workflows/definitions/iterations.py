"""The bounds every loop shares: a ``Loop`` node's and a polling ``Task``'s
``max_iterations`` and ``on_exhausted``, and a poll's ``repeat_until`` and ``every``.

Checked here, apart from the node classes, so that ``Task`` (in ``nodes``) and ``Loop``
(which builds on ``nodes``) word their problems alike.
"""

from __future__ import annotations

from datetime import timedelta

# What a loop (or a polling task) does when its body ran ``max_iterations`` times and it
# would go round again: fail the run with ``max_iterations_exceeded``, or go on.
ON_EXHAUSTED = ("fail", "continue")

# The most iterations a loop may declare: a loop body's history is kept row by row.
MAX_ITERATIONS_LIMIT = 10_000


def iteration_problems(max_iterations: object, on_exhausted: object) -> list[str]:
    """What is wrong with a loop's (or a polling task's) bound and its exhaustion rule."""
    found = []
    if (
        isinstance(max_iterations, bool)
        or not isinstance(max_iterations, int)
        or not 1 <= max_iterations <= MAX_ITERATIONS_LIMIT
    ):
        found.append(
            f"max_iterations must be an integer from 1 to {MAX_ITERATIONS_LIMIT}, "
            f"got {max_iterations!r}"
        )
    if on_exhausted not in ON_EXHAUSTED:
        found.append(f"on_exhausted must be one of {ON_EXHAUSTED}, got {on_exhausted!r}")
    return found


def repeat_problems(
    repeat_until: object, every: object, max_iterations: object, on_exhausted: object
) -> list[str]:
    """What is wrong with a polling task's ``repeat_until``, ``every`` and bound."""
    if repeat_until is None:
        if every is not None or max_iterations is not None:
            return ["every= and max_iterations= need repeat_until= (they shape a poll)"]
        return []
    found = []
    if not callable(repeat_until):
        found.append(f"repeat_until= must be callable, got {repeat_until!r}")
    if every is not None and (not isinstance(every, timedelta) or every < timedelta(0)):
        found.append(f"every must be a timedelta of zero or more, got {every!r}")
    if max_iterations is None:
        return [*found, "repeat_until= needs max_iterations= (a poll must end)"]
    return found + iteration_problems(max_iterations, on_exhausted)
