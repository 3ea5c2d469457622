"""Operator verbs as transitions: cancel a run, retry or skip a step, retry a run.

Each verb names the states it accepts and raises :class:`InvalidTransition` otherwise,
records who did it in the run's history, and is one transaction (children of a
cancelled run are cancelled afterwards, each in its own, child before parent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.utils import timezone

from workflows.definitions import FanOut, Gate, LeasedNode, Node
from workflows.definitions.nodes import default_retry
from workflows.engine.fanout import resume_fanout
from workflows.engine.gates import decision_output, respect_claim, stamp
from workflows.engine.guards import CANCEL, RETRY, RETRY_STEP, SKIP_STEP
from workflows.engine.runs import set_run_status, stop_forward_work, unwind
from workflows.engine.scope import RunScope, run_of_step, run_scope
from workflows.engine.sql import (
    StepRow,
    attempts_plus,
    cas_update,
    cas_update_many,
    db_now,
    step_row,
)
from workflows.engine.timers import cancel_timers
from workflows.engine.transaction import transition
from workflows.errors import InvalidTransition
from workflows.models import CompensationRecord, FanOutItem, Step
from workflows.status import CompensationStatus, DecisionVia, RunStatus, StepStatus


def actor(user: Any) -> str | None:
    """Who did it, as the history records it: the user's name, or ``None`` for the system."""
    return user.get_username() if user is not None else None


@transition
def cancel_run(
    run_id: UUID, *, reason: str = "", compensate: bool = True, user: Any = None
) -> None:
    """Stop a running or waiting run: cancel waiting work, compensate, end ``cancelled``.

    Running attempts finish (their results are recorded) or lose their lease; then the
    run's compensations run in reverse order unless ``compensate`` is false. Works on a
    run whose definition is no longer registered.
    """
    with run_scope(run_id, needs_definition=False) as scope:
        run, events = scope.run, scope.events
        CANCEL.check(run_id, run.status)
        stop_forward_work(run, events, reason="run cancelled")
        error = {"code": "cancelled", "message": reason or "cancelled", "by": actor(user)}
        changes: dict[str, Any] = {"error": error}
        if not compensate:
            changes["skip_compensation"] = True
            run.skip_compensation = True
        set_run_status(run, RunStatus.CANCELLING, events, **changes)
        events.add(
            run.pk, "run.cancel_requested", by=actor(user), reason=reason, compensate=compensate
        )
        unwind(run, events)


def _revive(scope: RunScope, user: Any) -> None:
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
        run_id=run.pk, kind="fanout", status=StepStatus.PENDING, items_total__gt=0
    ).values_list("id", "name"):
        resume_fanout(scope.advancer, step_id, name)
    scope.advancer.release_stranded()


def _reset_for_retry(scope: RunScope, row: StepRow, node: Node, user: Any) -> None:
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
def retry_step(step_id: int, *, user: Any = None) -> None:
    """Run a failed (or timed-out) step again, with fresh attempts; the run resumes."""
    with run_scope(run_of_step(step_id)) as scope:
        row = step_row(step_id)
        RETRY_STEP.check(row.name, row.status, scope.run.status)
        _reset_for_retry(scope, row, scope.workflow.nodes[row.name], user)
        _revive(scope, user)


@transition
def skip_step(step_id: int, *, output: Any = None, user: Any = None) -> None:
    """Record a step as done with ``output`` without running it, so the run moves on.

    Accepts steps not yet finished (pending, ready, waiting, retry scheduled) and failed
    or timed-out ones (their failed run resumes). The step ends ``completed`` with the
    operator's output; the history says who skipped it. A gate is refused: skipping one
    decides it, which :func:`skip_gate` records.
    """
    with run_scope(run_of_step(step_id)) as scope:
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
    user: Any,
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
    with run_scope(run_of_step(step_id)) as scope:
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
        username = actor(user)
        at = timezone.now()
        _skip(
            scope,
            row,
            {
                "output": decision_output(
                    chosen.decision,
                    by=username,
                    selections=chosen.selections,
                    feedback=chosen.feedback,
                ),
                "decision": chosen.decision,
                "decided_via": DecisionVia.OVERRIDE if overriding else DecisionVia.SKIP,
                "decided_by": user,
                "decided_at": at,
                "decided_from": None,
                "selections": chosen.selections,
                "feedback": chosen.feedback,
            },
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


def _skip(
    scope: RunScope,
    row: StepRow,
    changes: dict[str, Any],
    user: Any,
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
        _revive(scope, user)
    else:
        scope.advancer.settled(row.name)


@transition
def retry_run(run_id: UUID, *, user: Any = None) -> int:
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
        _revive(scope, user)
        return len(failed)


def _retry_compensations(scope: RunScope, user: Any) -> int:
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
