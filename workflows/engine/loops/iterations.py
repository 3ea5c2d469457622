"""A new iteration of steps a loop runs again.

What a step did in the iteration that ends is copied into a ``StepIteration`` row (one
``INSERT ... SELECT`` for all of them), then each step row is reset as a rerun resets
it (:func:`~workflows.engine.replay.reset_generation`: pending, fresh attempts, a new
generation and so a new idempotency key for it, its items and its compensations) with
the next ``iteration``, and so in a new round (:mod:`workflows.engine.telemetry.rounds`: empty
progress, summary and frames, attempts counted from 1). Its fan-out items and scheduled timers go
(:func:`~workflows.engine.replay.forget_work_of`); compensation records stay, so a
failure later undoes the work of every iteration.

A loop of its own inside the body counts its rounds afresh: a nested loop node (not
archived: its ``iteration`` counts the rounds of its own body) and a poll (archived, as
any body step) start again at iteration 1, so their ``max_iterations`` bounds each
round of the loop around them. A poll going round on its own
(:func:`start_next_poll`) moves on to its next iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from workflows.definitions import Loop, Node, Task, Workflow
from workflows.engine.replay import forget_work_of, reset_generation
from workflows.engine.sql.iterations import archive_iterations
from workflows.engine.sql.rows import StepRow
from workflows.engine.telemetry.rounds import keep_rounds


def start_next_iteration(rows: Sequence[StepRow], workflow: type[Workflow]) -> None:
    """Archive ``rows`` (final steps of a loop's body) and reset each to its next
    iteration; a loop of its own (a nested loop node, a poll) starts counting its rounds
    again. Each ``row`` carries its new status, version, generation and iteration
    afterwards."""
    _go_round(
        rows,
        workflow,
        lambda row: 1 if counts_its_rounds(workflow.nodes[row.name]) else row.iteration + 1,
    )


def start_next_poll(row: StepRow, workflow: type[Workflow]) -> None:
    """Archive the poll of ``row`` (its iteration just completed) and reset it to its
    next one."""
    _go_round([row], workflow, lambda row: row.iteration + 1)


def counts_its_rounds(node: Node) -> bool:
    """Whether ``node`` is a loop of its own, whose ``iteration`` is its round since it
    was last entered afresh: a loop node, or a polling task."""
    return isinstance(node, Loop) or (isinstance(node, Task) and node.repeat_until is not None)


def _go_round(
    rows: Sequence[StepRow], workflow: type[Workflow], next_iteration: Callable[[StepRow], int]
) -> None:
    if not rows:
        return
    archive_iterations([row.pk for row in rows if not isinstance(workflow.nodes[row.name], Loop)])
    keep_rounds([row.pk for row in rows])
    for row in rows:
        reset_generation(row, workflow, round_kept=True, iteration=next_iteration(row))
    forget_work_of([row.pk for row in rows])
