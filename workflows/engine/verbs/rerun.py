"""Rerunning an ended run from one of its steps.

The step and everything downstream of it are reset and run again; the outputs of its
upstream steps are kept. Each reset step starts a new *generation*: its idempotency
key (and its items' and compensations') changes, so external systems see the rerun as
new work, and it gets a fresh set of attempts. Steps the run's end cancelled before
they ran are reopened, so parallel branches that never ran run now. When a rerun is
refused for what became of the run's completed work is :mod:`workflows.engine.replay`'s
to say.

Inside a loop a rerun starts a new iteration rather than rewriting the current one: each
reset step of a loop's body keeps what it did as a finished iteration (a
``StepIteration`` row, as when the loop goes round) and moves on to the next iteration,
so the history keeps the round the operator reran. Each reset loop of its own (a loop
node, a poll) counts its rounds from 1 again: an operator's rerun is a fresh try, so a
run that failed with ``max_iterations_exceeded`` can be rerun for another
``max_iterations`` rounds (a poll's iteration that ran out is archived first). Steps
outside every loop are reset as before, in the iteration they are in.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from workflows.definitions import Workflow
from workflows.engine.deadlines import arm_deadline
from workflows.engine.events import actor
from workflows.engine.flows.heal import check_dependencies, heal_downstream, lock_flow_of
from workflows.engine.guards import RERUN
from workflows.engine.loops.iterations import counts_its_rounds, start_next_iteration
from workflows.engine.replay import (
    downstream_of,
    facts_of_rows,
    forget_work_of,
    rearm_skipped_compensations,
    rerun_compensation_refusal,
    rerun_order_refusal,
    reset_generation,
    step_rows_of,
)
from workflows.engine.runs import set_run_status
from workflows.engine.scope import run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow
from workflows.engine.sql.updates import cas_update_many
from workflows.engine.transaction import transition
from workflows.errors import InvalidTransition, StepNotFound
from workflows.models import Run, Step
from workflows.status import RunStatus, StepStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


@transition
def rerun_from(
    run_id: UUID,
    step_name: str,
    *,
    reason: str = "",
    user: AnyUser | None = None,
    deadline: timedelta | datetime | None = None,
) -> list[str]:
    """Reset ``step_name`` and its downstream steps of an ended run and run them again.

    Accepts every ended run: completed, failed, cancelled, terminated, compensated,
    compensation_failed. Refused, saying why, when an upstream of the step did not
    complete, when another step outside the reset failed too, or when what the run's
    completed work became forbids it (:mod:`workflows.engine.replay`: a reset step's
    work whose compensation never ran, an undone step the reset leaves out, a failed
    compensation). Of two operators rerunning at once, the second finds the run
    running and is refused. The run's old error is cleared, and its deadline too
    unless ``deadline`` gives a new one. Steps of a loop's body start their next
    iteration, loop nodes and polls their first round (the module docstring says why).
    Returns the names of the reset steps. A flow member: as :func:`retry_run`, refused
    with :class:`~workflows.errors.DependencyUnmet` while a failed dependency keeps it
    cancelled, and the members its end cancelled heal.
    """
    lock_flow_of(run_id)
    with run_scope(run_id) as scope:
        run, workflow = scope.run, scope.workflow
        RERUN.check(run_id, run.status)
        if check_dependencies(run, scope.events, user):
            return []
        if step_name not in workflow.nodes:
            raise StepNotFound(
                f"run {run_id} has no step {step_name!r}; its steps: {', '.join(workflow.nodes)}"
            )
        rows = step_rows_of(run.pk)
        reset = downstream_of(workflow.graph, [step_name])
        _check_rerunnable(run_id, workflow, step_name, reset, rows)
        _reset(workflow, reset, rows)
        reopened = _reopen_cancelled(run)
        rearmed = rearm_skipped_compensations(run.pk)
        set_run_status(
            run,
            RunStatus.RUNNING,
            scope.events,
            error=None,
            output=None,
            finished_at=None,
            skip_compensation=False,
            paused_reason="",
            deadline=arm_deadline(run, deadline),
        )
        scope.events.add(
            run.pk,
            "run.rerun_requested",
            by=actor(user),
            reason=reason,
            from_step=step_name,
            reset=reset,
            reopened=reopened,
            **({"compensations_rearmed": rearmed} if rearmed else {}),
        )
        heal_downstream(run, scope.events, user)
        scope.advancer.release_stranded()
    return reset


def _reset(workflow: type[Workflow], reset: list[str], rows: dict[str, StepRow]) -> None:
    """Reset the steps named ``reset``: those in a loop to their next iteration, the
    others to a new generation; what they had started (items, timers) goes."""
    looped = [name for name in reset if _in_a_loop(workflow, name)]
    start_next_iteration([rows[name] for name in looped], workflow)
    others = [rows[name] for name in reset if name not in looped]
    for row in others:
        reset_generation(row, workflow)
    forget_work_of([row.pk for row in others])


def _reopen_cancelled(run: Run) -> list[str]:
    """Steps the run's end cancelled before they ran go back to ``pending``: their
    names, sorted."""
    reopened = cas_update_many(
        Step,
        where={"run_id": run.pk, "status": StepStatus.CANCELLED},
        returning=("name",),
        status=StepStatus.PENDING,
        error=None,
        finished_at=None,
        updated_at=db_now(),
    )
    return sorted(name for (name,) in reopened)


def _in_a_loop(workflow: type[Workflow], name: str) -> bool:
    """Whether a rerun resetting ``name`` starts a new iteration: a loop of its own (a
    loop node, a poll), or a step of a loop's body."""
    return counts_its_rounds(workflow.nodes[name]) or bool(workflow.graph.loops_around(name))


def _check_rerunnable(
    run_id: UUID,
    workflow: type[Workflow],
    step_name: str,
    reset: list[str],
    rows: dict[str, StepRow],
) -> None:
    facts = facts_of_rows(run_id, rows)
    refusal = rerun_order_refusal(workflow.graph, step_name, reset, facts)
    refusal = refusal or rerun_compensation_refusal(step_name, reset, facts)
    if refusal is not None:
        uncompensated = sorted(name for name in reset if facts[name].standing_uncompensated)
        raise InvalidTransition(
            f"run {run_id}: {refusal}",
            step=step_name,
            **({"uncompensated": uncompensated} if uncompensated else {}),
        )
