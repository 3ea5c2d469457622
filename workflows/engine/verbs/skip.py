"""Skip a step: record it done with an operator's output so the run moves on. A gate
is skipped only by :func:`skip_gate`, which records the skip as the decision it is."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from workflows.definitions import Gate
from workflows.definitions.gate import SkipDecision
from workflows.engine.events import actor
from workflows.engine.flows.heal import lock_flow_of
from workflows.engine.guards import SKIP_STEP
from workflows.engine.nodes.gate import decision_output, respect_claim, stamp
from workflows.engine.scope import RunScope, run_of_step, run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.timers import cancel_timers
from workflows.engine.transaction import transition
from workflows.engine.verbs.retry import revive
from workflows.errors import InvalidTransition
from workflows.models import Step
from workflows.status import DecisionVia, RunStatus, StepStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


@transition
def skip_step(step_id: int, *, output: Any = None, user: AnyUser | None = None) -> None:
    """Record a step as done with ``output`` without running it, so the run moves on.

    Accepts steps not yet finished (pending, ready, waiting, retry scheduled) and failed
    or timed-out ones (their failed run resumes). The step ends ``completed`` with the
    operator's output; the history says who skipped it. A gate is refused: skipping one
    decides it, which :func:`skip_gate` records.
    """
    run_id = run_of_step(step_id)
    lock_flow_of(run_id)  # a failed member that resumes heals its flow (revive)
    with run_scope(run_id) as scope:
        run, row = scope.run, step_row(step_id)
        SKIP_STEP.check(row.name, row.status, run.status)
        if isinstance(scope.workflow.nodes[row.name], Gate):
            raise InvalidTransition(
                f"step {row.name!r} is a gate: skipping it decides it (skip_gate)",
                status=row.status,
                verb=SKIP_STEP.name,
            )
        _skip(scope, row, {"output": output}, user)


@transition
def skip_gate(
    step_id: int,
    *,
    output: Any = None,
    user: AnyUser,
    overriding: bool,
    may_override_claim: Callable[[], bool] | None = None,
) -> None:
    """Record a gate decided by an operator's skip, so the run moves on.

    The caller has checked who ``user`` is: one the gate's rule admits, or (with
    ``overriding``) a holder of ``workflows.override_gate_rule`` whom it does not.
    ``output`` must be a decision the gate accepts (:meth:`Gate.skip_decision`); the
    step's output is then shaped as a person's decision, so later steps read it the
    same way. A decider's skip records ``gate.decided``; an override records
    ``gate.overridden`` instead, never an ordinary decision, with the rule it set
    aside. Both record ``step.skipped``. A skip that overturns an earlier decision (a
    rejected gate that failed its run) names it.

    How it loses a race (nothing is written for the loser): a waiting gate someone
    else claimed first is refused with :class:`GateClaimed` unless
    ``may_override_claim()``; a gate decided or timed out meanwhile leaves the
    statuses ``skip`` accepts, or fails the step's compare-and-set, and the skip is
    refused with :class:`InvalidTransition`.
    """
    run_id = run_of_step(step_id)
    lock_flow_of(run_id)  # a failed member that resumes heals its flow (revive)
    with run_scope(run_id) as scope:
        run, row = scope.run, step_row(step_id)
        SKIP_STEP.check(row.name, row.status, run.status)
        node = scope.workflow.nodes[row.name]
        if not isinstance(node, Gate):
            raise InvalidTransition(f"step {row.name!r} is a {node.kind}, not a gate")
        chosen = node.skip_decision(output)
        claimer = (
            respect_claim(row, user, may_override_claim, "skip")
            if row.status == StepStatus.WAITING
            else None
        )
        earlier = Step.objects.filter(pk=row.pk).values("decision", "decided_via").get()
        at = timezone.now()
        _skip(
            scope,
            row,
            _skipped_as_decided(chosen, user, at, overriding),
            user,
            decided={
                "decision": chosen.decision,
                **stamp(user, None, at),
                "via": "skip",
                **({"overrode_claim_of": claimer} if claimer is not None else {}),
                **({"overturned": earlier} if earlier["decision"] else {}),
                **({"rule": node.step_columns()} if overriding else {}),
            },
            decided_type="gate.overridden" if overriding else "gate.decided",
        )


def _skipped_as_decided(
    chosen: SkipDecision, user: AnyUser, at: datetime, overriding: bool
) -> dict[str, Any]:
    """The columns of a gate skipped with ``chosen``: its output shaped as a person's
    decision, and the decision recorded as a skip (or an override of the gate's rule)."""
    output = decision_output(
        chosen.decision, by=actor(user), selections=chosen.selections, feedback=chosen.feedback
    )
    return {
        "output": output,
        "decision": chosen.decision,
        "decided_via": DecisionVia.OVERRIDE if overriding else DecisionVia.SKIP,
        "decided_by": user,
        "decided_at": at,
        "decided_from": None,
        "selections": chosen.selections,
        "feedback": chosen.feedback,
    }


def _skip(
    scope: RunScope,
    row: StepRow,
    changes: dict[str, Any],
    user: AnyUser | None,
    *,
    decided: dict[str, Any] | None = None,
    decided_type: str = "",
) -> None:
    """Complete ``row`` with ``changes`` as an operator's skip, then move the run on
    (a failed run resumes). ``decided``: the payload of the gate's decision event."""
    run = scope.run
    cancel_timers(row.pk)
    scope.advancer.move(row, StepStatus.COMPLETED, finished_at=db_now(), error=None, **changes)
    if decided is not None:
        scope.events.add(run.pk, decided_type, step_id=row.pk, **decided)
    scope.events.add(run.pk, "step.skipped", step_id=row.pk, by=actor(user), reason="operator")
    if run.status == RunStatus.FAILED:
        revive(scope, user)
    else:
        scope.advancer.settled(row.name)
