"""Rerunning a finished run from one of its steps.

The step and everything downstream of it are reset and run again; the outputs of its
upstream steps are kept. Each reset step starts a new *generation*: its idempotency
key (and its items' and compensations') changes, so external systems see the rerun as
new work, and it gets a fresh set of attempts. Steps the run's end cancelled before
they ran are reopened, so parallel branches that never ran run now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.definitions import LeasedNode, Workflow
from workflows.engine.events import actor
from workflows.engine.guards import RERUN
from workflows.engine.runs import set_run_status
from workflows.engine.scope import run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import STEP_ROW_FIELDS, StepRow
from workflows.engine.sql.updates import cas_update, cas_update_many
from workflows.engine.transaction import transition
from workflows.errors import InvalidTransition, StaleState, StepNotFound
from workflows.models import CompensationRecord, FanOutItem, Step, Timer
from workflows.status import CompensationStatus, RunStatus, StepStatus, TimerStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

# What a reset step forgets: everything a previous run of it wrote.
_FORGOTTEN: dict[str, Any] = {
    "output": None,
    "error": None,
    "started_at": None,
    "finished_at": None,
    "lease_owner": "",
    "lease_expires_at": None,
    "decision": "",
    "decided_via": "",
    "decided_by": None,
    "decided_at": None,
    "feedback": "",
    "selections": [],
    "signal_name": "",
    "items_total": 0,
    "items_completed": 0,
    "items_failed": 0,
    "items_skipped": 0,
}
_SETTLED = (StepStatus.COMPLETED, StepStatus.SKIPPED)
_FAILED = (StepStatus.FAILED, StepStatus.TIMED_OUT)


def downstream_of(workflow: type[Workflow], name: str) -> list[str]:
    """``name`` and every step that depends on it, directly or not, in declaration order."""
    found, frontier = {name}, [name]
    while frontier:
        for down in workflow.graph.downstream[frontier.pop()]:
            if down not in found:
                found.add(down)
                frontier.append(down)
    return [step for step in workflow.nodes if step in found]


@transition
def rerun_from(
    run_id: UUID, step_name: str, *, reason: str = "", user: AnyUser | None = None
) -> list[str]:
    """Reset ``step_name`` and its downstream steps of a finished run and run them again.

    Accepts failed, completed and cancelled runs. Refused, saying why, when an upstream
    of the step did not complete, when another step outside the reset failed too, or
    when a reset step completed work whose compensation never ran (rerunning it would
    do that work twice). Of two operators rerunning at once, the second finds the run
    running and is refused. Returns the names of the reset steps.
    """
    with run_scope(run_id) as scope:
        run, workflow = scope.run, scope.workflow
        RERUN.check(run_id, run.status)
        if step_name not in workflow.nodes:
            raise StepNotFound(
                f"run {run_id} has no step {step_name!r}; its steps: {', '.join(workflow.nodes)}"
            )
        rows = {
            row.name: row
            for row in (
                StepRow(*values)
                for values in Step.objects.filter(run_id=run.pk).values_list(*STEP_ROW_FIELDS)
            )
        }
        reset = downstream_of(workflow, step_name)
        _check_rerunnable(run_id, workflow, step_name, reset, rows)
        for name in reset:
            _reset(rows[name], workflow)
        reset_ids = [rows[name].pk for name in reset]
        FanOutItem.objects.filter(step_id__in=reset_ids).delete()  # computed again on entry
        cas_update_many(
            Timer,
            where={"step_id": reset_ids, "status": TimerStatus.SCHEDULED},
            status=TimerStatus.CANCELLED,
        )
        reopened = cas_update_many(
            Step,
            where={"run_id": run.pk, "status": StepStatus.CANCELLED},
            returning=("name",),
            status=StepStatus.PENDING,
            error=None,
            finished_at=None,
            updated_at=db_now(),
        )
        set_run_status(
            run,
            RunStatus.RUNNING,
            scope.events,
            error=None,
            output=None,
            finished_at=None,
            skip_compensation=False,
        )
        scope.events.add(
            run.pk,
            "run.rerun_requested",
            by=actor(user),
            reason=reason,
            from_step=step_name,
            reset=reset,
            reopened=sorted(name for (name,) in reopened),
        )
        scope.advancer.release_stranded()
    return reset


def _check_rerunnable(
    run_id: UUID,
    workflow: type[Workflow],
    step_name: str,
    reset: list[str],
    rows: dict[str, StepRow],
) -> None:
    for upstream in workflow.graph.upstream[step_name]:
        if rows[upstream].status not in _SETTLED:
            raise InvalidTransition(
                f"run {run_id}: rerun from {step_name!r} needs its upstream steps completed "
                f"or skipped; {upstream!r} is {rows[upstream].status}",
                step=step_name,
            )
    other_failures = [
        name for name, row in rows.items() if row.status in _FAILED and name not in reset
    ]
    if other_failures:
        raise InvalidTransition(
            f"run {run_id}: step {other_failures[0]!r} failed too and is not downstream of "
            f"{step_name!r}; rerun from it, or retry the run",
            step=step_name,
        )
    uncompensated = sorted(
        CompensationRecord.objects.filter(
            step_id__in=[rows[name].pk for name in reset],
            status=CompensationStatus.PENDING,
        ).values_list("step__name", flat=True)
    )
    if uncompensated:
        raise InvalidTransition(
            f"run {run_id}: step {uncompensated[0]!r} completed work whose compensation "
            "never ran; rerunning it would do that work twice",
            step=step_name,
            uncompensated=sorted(set(uncompensated)),
        )


def _reset(row: StepRow, workflow: type[Workflow]) -> None:
    """A new generation of the step: pending, with a fresh set of attempts."""
    node = workflow.nodes[row.name]
    attempts = node.effective_retry.max_attempts if isinstance(node, LeasedNode) else 1
    if not cas_update(
        Step,
        row.pk,
        version=row.version,
        where={"status": row.status},
        status=StepStatus.PENDING,
        max_attempts=row.attempt + attempts,
        generation=row.generation + 1,
        updated_at=db_now(),
        **_FORGOTTEN,
    ):
        raise StaleState(f"step {row.name!r} changed while being reset")
