"""Retry a failed step, or replay a whole ended run: fresh attempts, and the run resumes.
:func:`revive` is the resumption, shared with a skip that unblocks a failed run.

``retry_run`` takes every ended run but a completed one: failed, cancelled, terminated,
compensated, and compensation_failed (whose failed compensations run again). What it
does again, and when it refuses, is :mod:`workflows.engine.replay`'s to say: the work
that never completed is finished with fresh attempts under the same idempotency key,
undone work and everything after it is done again in a new generation.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.definitions import FanOut, LeasedNode, Loop, Node
from workflows.definitions.nodes import default_retry
from workflows.engine.deadlines import arm_deadline
from workflows.engine.events import actor
from workflows.engine.flows.heal import check_dependencies, heal_downstream, lock_flow_of
from workflows.engine.guards import RETRY, RETRY_STEP
from workflows.engine.loops.bounds import MAX_ITERATIONS_EXCEEDED
from workflows.engine.loops.iterations import counts_its_rounds, start_next_iteration
from workflows.engine.nodes.fanout import resume_fanout
from workflows.engine.replay import (
    RetryPlan,
    facts_of_rows,
    forget_work_of,
    rearm_skipped_compensations,
    reset_generation,
    retry_plan,
    step_rows_of,
)
from workflows.engine.runs import reopen_cancelled_steps, set_run_status, unwind
from workflows.engine.scope import RunScope, run_of_step, run_scope
from workflows.engine.sql.expressions import attempts_plus, db_now
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.sql.updates import cas_update, cas_update_many
from workflows.engine.telemetry.rounds import NEW_ROUND, keep_rounds
from workflows.engine.transaction import transition
from workflows.errors import InvalidInput, InvalidTransition
from workflows.models import CompensationRecord, FanOutItem, Step
from workflows.status import CompensationStatus, RunStatus, StepStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def revive(scope: RunScope, user: AnyUser | None, **changes: Any) -> None:
    """Bring an ended run back to ``running`` and release what can run again: steps
    cancelled by its end become pending, fan-outs keep their completed items. The old
    error is cleared, and so is the deadline (its timer went with the run's end) unless
    ``changes`` gives one: ``changes`` are more columns of the run to set with its
    status. A revived run past its old deadline would otherwise be stopped at its
    handlers' first heartbeat (:mod:`workflows.engine.cancellation`). A flow member's
    downstream members cancelled for its failure heal (:mod:`workflows.engine.flows.heal`:
    the caller locked the flow first, :func:`lock_flow_of`)."""
    run = scope.run
    changes.setdefault("deadline", None)
    run.deadline = changes["deadline"]
    reopened = reopen_cancelled_steps(run)
    set_run_status(run, RunStatus.RUNNING, scope.events, error=None, finished_at=None, **changes)
    scope.events.add(run.pk, "run.resumed", by=actor(user), reopened=reopened)
    heal_downstream(run, scope.events, user)
    for step_id, name in Step.objects.filter(
        run_id=run.pk, kind=FanOut.kind, status=StepStatus.PENDING, items_total__gt=0
    ).values_list("id", "name"):
        resume_fanout(scope.advancer, step_id, name)
    scope.advancer.release_stranded()


def _ran_out(row: StepRow) -> bool:
    """Whether ``row`` (a loop node or a poll) failed for having run out of iterations:
    one small read, for those steps only."""
    error = Step.objects.filter(pk=row.pk).values_list("error", flat=True).first() or {}
    return error.get("code") == MAX_ITERATIONS_EXCEEDED


def _reset_for_retry(scope: RunScope, row: StepRow, node: Node, user: AnyUser | None) -> None:
    """Give a failed step a fresh set of attempts (a fan-out: its failed items).

    The budget grows by a whole policy beyond the attempts already made, so attempts
    4, 5 and 6 of a three-attempt policy run with the policy's backoff again; the step
    starts a new round (:mod:`workflows.engine.telemetry.rounds`), so they show as attempts 1, 2
    and 3 of it, with empty progress, summary and frames. A loop
    that ran out of iterations gets a fresh count of rounds the same way: its
    ``while_`` is asked again, and its body may go round ``max_iterations`` more times;
    a poll that ran out keeps its last poll as an iteration and polls afresh (a new
    generation, so a new key: the last poll completed, this is new work).
    """
    run = scope.run
    changes: dict[str, Any] = {}
    if counts_its_rounds(node) and _ran_out(row):
        if isinstance(node, Loop):
            changes["iteration"] = 1
        else:  # a poll: its last poll kept, a fresh set of polls under a new key
            start_next_iteration([row], scope.workflow)
            scope.events.add(run.pk, "step.retried", step_id=row.pk, by=actor(user))
            return
    if isinstance(node, FanOut):
        reset = cas_update_many(
            FanOutItem,
            where={"step_id": row.pk, "status": StepStatus.FAILED},
            status=StepStatus.PENDING,
            max_attempts=attempts_plus(node.effective_retry.max_attempts),
            error=None,
            finished_at=None,
            updated_at=db_now(),
        )
        changes["items_failed"] = 0
        scope.events.add(run.pk, "items.reset", step_id=row.pk, count=len(reset))
    attempts = node.effective_retry.max_attempts if isinstance(node, LeasedNode) else 1
    keep_rounds([row.pk])
    if not cas_update(
        Step,
        row.pk,
        version=row.version,
        where={"status": row.status},
        status=StepStatus.PENDING,
        error=None,
        finished_at=None,
        max_attempts=row.attempt + attempts,
        **NEW_ROUND,
        decision="",
        decided_via="",
        decided_by=None,
        decided_at=None,
        feedback="",
        selections=[],
        updated_at=db_now(),
        **changes,
    ):
        raise InvalidTransition(f"step {row.name!r} changed while being retried")
    scope.events.add(run.pk, "step.retried", step_id=row.pk, by=actor(user))


@transition
def retry_step(
    step_id: int, *, user: AnyUser | None = None, expected_round: int | None = None
) -> None:
    """Run a failed (or timed-out) step again, with fresh attempts; the run resumes.

    ``expected_round``: the step's round the caller saw failed. A step retried since
    (and failed again) is in a later round, and is refused with
    :class:`InvalidTransition` rather than retried a second time for one request.
    """
    run_id = run_of_step(step_id)
    lock_flow_of(run_id)
    with run_scope(run_id) as scope:
        if check_dependencies(scope.run, scope.events, user):
            return
        row = step_row(step_id)
        RETRY_STEP.check(row.name, row.status, scope.run.status)
        if expected_round is not None:
            current = Step.objects.filter(pk=step_id).values_list("round", flat=True).get()
            if current != expected_round:
                raise InvalidTransition(
                    f"step {row.name!r}: it is in round {current} now, not {expected_round}: "
                    "it was retried since it was read, and was left alone",
                    status=row.status,
                    verb=RETRY_STEP.name,
                )
        _reset_for_retry(scope, row, scope.workflow.nodes[row.name], user)
        revive(scope, user)


@transition
def retry_run(
    run_id: UUID,
    *,
    user: AnyUser | None = None,
    deadline: timedelta | datetime | None = None,
) -> int:
    """Replay an ended run: finish what did not complete, redo what was undone.

    Failed, timed-out and cut-short steps get fresh attempts (same idempotency key);
    steps cancelled before they started reopen; compensated steps and everything
    downstream of them start a new generation; skipped compensations are re-armed. A
    run whose compensation failed runs its failed compensations again instead. Refused,
    saying why, for a completed run (rerun it from a step) and where redoing undone work
    would do work whose compensation never ran a second time
    (:func:`workflows.engine.replay.retry_plan`). The run's error is cleared, and its
    deadline too unless ``deadline`` gives a new one (refused for a run whose
    compensation failed: no deadline stops a compensation). Returns how many steps (or
    compensations) it retried or redid.

    A flow member cancelled with ``dependency_failed`` is refused with
    :class:`~workflows.errors.DependencyUnmet` while its join is not satisfied; the
    members its end cancelled that way heal (:mod:`workflows.engine.flows.heal`).
    """
    lock_flow_of(run_id)
    with run_scope(run_id) as scope:
        run = scope.run
        if check_dependencies(run, scope.events, user):
            return 0
        RETRY.check(run_id, run.status)
        if run.status == RunStatus.COMPENSATION_FAILED:
            return _retry_compensations(scope, user, deadline)
        rows = step_rows_of(run.pk)
        facts = facts_of_rows(run.pk, rows)
        plan = retry_plan(
            scope.workflow.graph, facts, {name: row.attempt for name, row in rows.items()}
        )
        if plan.refusal is not None:
            raise InvalidTransition(f"run {run_id}: {plan.refusal}", verb=RETRY.name)
        source = run.status
        _redo_and_retry(scope, rows, plan, user)
        rearmed = rearm_skipped_compensations(run.pk)
        scope.events.add(
            run.pk,
            "run.retry_requested",
            by=actor(user),
            status=source,
            redo=list(plan.redo),
            retried=list(plan.retry),
            **({"compensations_rearmed": rearmed} if rearmed else {}),
        )
        revive(
            scope,
            user,
            skip_compensation=False,
            paused_reason="",
            deadline=arm_deadline(run, deadline),
        )
        return len(plan.redo) + len(plan.retry)


def _redo_and_retry(
    scope: RunScope, rows: dict[str, StepRow], plan: RetryPlan, user: AnyUser | None
) -> None:
    """Apply the plan: undone steps (and what follows them) start a new generation,
    the others that did not complete get fresh attempts."""
    for name in plan.redo:
        reset_generation(rows[name], scope.workflow)
    forget_work_of([rows[name].pk for name in plan.redo])
    for name in plan.retry:
        _reset_for_retry(scope, rows[name], scope.workflow.nodes[name], user)


def _retry_compensations(
    scope: RunScope, user: AnyUser | None, deadline: timedelta | datetime | None
) -> int:
    """Give failed compensations a fresh set of attempts and unwind again (refused with
    a ``deadline``: none stops a compensation)."""
    run = scope.run
    if deadline is not None:
        raise InvalidInput(
            f"run {run.pk}: its retry runs its failed compensations again, which no "
            "deadline stops; retry it without one",
            field="deadline",
        )
    retried = cas_update_many(
        CompensationRecord,
        where={"run_id": run.pk, "status": CompensationStatus.FAILED},
        status=CompensationStatus.PENDING,
        max_attempts=attempts_plus(default_retry().max_attempts),
        error=None,
        finished_at=None,
        updated_at=db_now(),
    )
    cancelled = (run.error or {}).get("code") == "cancelled"
    target = RunStatus.CANCELLING if cancelled else RunStatus.COMPENSATING
    set_run_status(run, target, scope.events)
    scope.events.add(run.pk, "compensations.retried", by=actor(user), count=len(retried))
    unwind(run, scope.events)
    return len(retried)
