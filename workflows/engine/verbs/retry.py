"""Retry a failed step, or every failed step (or failed compensation) of a run: fresh
attempts, and the failed run resumes. :func:`revive` is the resumption, shared with a
skip that unblocks a failed run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.definitions import FanOut, LeasedNode, Node
from workflows.definitions.nodes import default_retry
from workflows.engine.events import actor
from workflows.engine.guards import RETRY, RETRY_STEP
from workflows.engine.nodes.fanout import resume_fanout
from workflows.engine.runs import set_run_status, unwind
from workflows.engine.scope import RunScope, run_of_step, run_scope
from workflows.engine.sql.expressions import attempts_plus, db_now
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.sql.updates import cas_update, cas_update_many
from workflows.engine.transaction import transition
from workflows.errors import InvalidTransition
from workflows.models import CompensationRecord, FanOutItem, Step
from workflows.status import CompensationStatus, RunStatus, StepStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def revive(scope: RunScope, user: AnyUser | None) -> None:
    """Bring a failed run back to ``running`` and release what can run again: steps
    cancelled by the failure become pending, fan-outs keep their completed items."""
    run = scope.run
    reopened = cas_update_many(
        Step,
        where={"run_id": run.pk, "status": StepStatus.CANCELLED},
        status=StepStatus.PENDING,
        finished_at=None,
        error=None,
        updated_at=db_now(),
    )
    set_run_status(run, RunStatus.RUNNING, scope.events, error=None, finished_at=None)
    scope.events.add(run.pk, "run.resumed", by=actor(user), reopened=len(reopened))
    for step_id, name in Step.objects.filter(
        run_id=run.pk, kind=FanOut.kind, status=StepStatus.PENDING, items_total__gt=0
    ).values_list("id", "name"):
        resume_fanout(scope.advancer, step_id, name)
    scope.advancer.release_stranded()


def _reset_for_retry(scope: RunScope, row: StepRow, node: Node, user: AnyUser | None) -> None:
    """Give a failed step a fresh set of attempts (a fan-out: its failed items).

    The budget grows by a whole policy beyond the attempts already made, so attempts
    4, 5 and 6 of a three-attempt policy run with the policy's backoff again.
    """
    run = scope.run
    changes: dict[str, Any] = {}
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
    if not cas_update(
        Step,
        row.pk,
        version=row.version,
        where={"status": row.status},
        status=StepStatus.PENDING,
        error=None,
        finished_at=None,
        max_attempts=row.attempt + attempts,
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
def retry_step(step_id: int, *, user: AnyUser | None = None) -> None:
    """Run a failed (or timed-out) step again, with fresh attempts; the run resumes."""
    with run_scope(run_of_step(step_id)) as scope:
        row = step_row(step_id)
        RETRY_STEP.check(row.name, row.status, scope.run.status)
        _reset_for_retry(scope, row, scope.workflow.nodes[row.name], user)
        revive(scope, user)


@transition
def retry_run(run_id: UUID, *, user: AnyUser | None = None) -> int:
    """Retry every failed step of a failed run, or resume a run whose compensation failed.

    Returns how many steps or compensations were retried.
    """
    with run_scope(run_id) as scope:
        run = scope.run
        RETRY.check(run_id, run.status)
        if run.status == RunStatus.COMPENSATION_FAILED:
            return _retry_compensations(scope, user)
        failed = [
            StepRow(*values)
            for values in Step.objects.filter(
                run_id=run.pk, status__in=RETRY_STEP.accepts
            ).values_list(
                "id", "name", "status", "version", "attempt", "max_attempts", "generation"
            )
        ]
        for row in failed:
            _reset_for_retry(scope, row, scope.workflow.nodes[row.name], user)
        revive(scope, user)
        return len(failed)


def _retry_compensations(scope: RunScope, user: AnyUser | None) -> int:
    """Give failed compensations a fresh set of attempts and unwind again."""
    run = scope.run
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
