"""Pausing and resuming a run: nothing new starts while it is paused.

A paused run holds its work. Claims refuse its ready units, graph evaluation releases
nothing, its timers stay scheduled (they fire after the resume, once), no compensation
starts. Work already running finishes and is recorded: a completion is stored (its
downstream steps wait), a failed attempt gets its retry timer, a step failing for good
stays failed. The resume settles all of that: a failed step fails the run, fan-outs
count the items that ended, pending steps whose upstreams finished are entered, and
every ready unit is dispatched again.

A claim that read the run just before the pause committed may still start one unit;
it is recorded like any work in flight (claims do not take the run lock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from workflows.definitions import FanOut
from workflows.definitions.limits import Route
from workflows.engine.events import actor
from workflows.engine.guards import PAUSE, RESUME
from workflows.engine.nodes.fanout import continue_fanout
from workflows.engine.replay import step_rows_of
from workflows.engine.runs import set_run_status
from workflows.engine.scope import run_scope
from workflows.engine.transaction import transition
from workflows.engine.work_kinds import WORK_KINDS
from workflows.models import Step
from workflows.status import RunStatus, StepStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

_FAILED = (StepStatus.FAILED, StepStatus.TIMED_OUT)


@transition
def pause_run(run_id: UUID, *, reason: str = "", user: AnyUser | None = None) -> None:
    """Pause a pending, running or waiting run until :func:`resume_run`.

    Of a pause and a racing transition of the same run, whichever takes the run lock
    second sees the other's result: a completion that commits first may have claimed
    the next step (it runs and is recorded); one that commits second releases nothing.
    Works on a run whose definition is no longer registered.
    """
    with run_scope(run_id, needs_definition=False) as scope:
        run = scope.run
        PAUSE.check(run_id, run.status)
        set_run_status(run, RunStatus.PAUSED, scope.events, paused_reason=reason)
        scope.events.add(run.pk, "run.pause_requested", by=actor(user), reason=reason)


@transition
def resume_run(run_id: UUID, *, user: AnyUser | None = None) -> None:
    """Resume a paused run: settle what happened meanwhile, start its work again."""
    with run_scope(run_id) as scope:
        run = scope.run
        RESUME.check(run_id, run.status)
        set_run_status(run, RunStatus.RUNNING, scope.events, paused_reason="")
        scope.events.add(run.pk, "run.resume_requested", by=actor(user))
        rows = list(step_rows_of(run.pk).values())
        failed = next((row for row in rows if row.status in _FAILED), None)
        if failed is not None:  # it failed for good while the run was paused
            error = Step.objects.values_list("error", flat=True).get(pk=failed.pk) or {}
            scope.advancer.fail(failed.name, error)
            return
        held = [  # ready before the pause, or made ready while paused: nudge them again
            (kind, unit_id, Route.of_row(queue, requires))
            for kind in WORK_KINDS
            if kind.held_while
            for unit_id, queue, requires in kind.model.objects.filter(
                **{kind.run_path: run.pk}, status=StepStatus.READY
            ).values_list("id", "queue", "requires")
        ]
        for row in rows:
            fanout = isinstance(scope.workflow.nodes[row.name], FanOut)
            if fanout and row.status == StepStatus.RUNNING and run.status == RunStatus.RUNNING:
                continue_fanout(scope.advancer, row)
        scope.advancer.release_stranded()
        for kind, unit_id, route in held:
            if run.status in kind.runs_while:
                scope.advancer.mark_in_hand()
                scope.dispatch(kind, unit_id, route)
