"""Operator verbs on one step: retry it, skip it (a gate's skip is a decision), or fail
it, or one of its items or compensations, when it is stuck."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, cast

from workflows.approvals import (
    may_override_claim,
)
from workflows.definitions import Gate
from workflows.engine.verbs import fail, retry, skip
from workflows.models import Step
from workflows.services.gates import skip_overrides_rule
from workflows.services.leases import LeasedUnit, shown_attempts, unit_of
from workflows.services.targets import step_of
from workflows.validation import check_json, check_text

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def retry_step(
    step: Step | int, *, user: AnyUser | None = None, expected_round: int | None = None
) -> Step:
    """Run a failed step again with fresh attempts; its failed run resumes.

    ``expected_round`` pins the step's round the caller saw (``step.round``): a step
    retried by someone else since is refused (:class:`InvalidTransition`), not retried twice.
    """
    target = step_of(step)
    retry.retry_step(target.pk, user=user, expected_round=expected_round)
    return step_of(target)


def skip_step(step: Step | int, *, user: AnyUser | None = None, output: Any = None) -> Step:
    """Record a step as done with ``output`` without running it; the run moves on.

    ``output`` is checked as a handler's output is: :class:`InvalidInput` if the
    database cannot store it, and nothing is written. Skipping a gate decides it: only
    a user the gate's rule admits may, or a holder of ``workflows.override_gate_rule``
    (recorded as an override), else ``PermissionDenied``; ``output`` is then the decision
    (``{"decision", "selections", "feedback"}``, :class:`InvalidDecision` if it does not
    fit the gate's options) and a claim by someone else is respected as by a decision.
    """
    target = step_of(step)
    check_json(output, field="output of the skipped step")
    if target.kind == Gate.kind:
        overriding = skip_overrides_rule(target, user)
        decider = cast("AnyUser", user)  # skip_overrides_rule refused a skip without one
        skip.skip_gate(
            target.pk,
            output=output,
            user=decider,
            overriding=overriding,
            may_override_claim=partial(may_override_claim, decider),
        )
    else:
        skip.skip_step(target.pk, output=output, user=user)
    return step_of(target)


def fail_step(
    unit: LeasedUnit | int,
    *,
    expected_attempt: int | None = None,
    expected_round: int | None = None,
    expected_status: str | None = None,
    item: str | None = None,
    compensation: bool = False,
    reason: str = "",
    user: AnyUser | None = None,
) -> LeasedUnit:
    """End stuck work as failed now: a ready, retry-scheduled or running task step, fan-out
    item or compensation, as if its last attempt had failed for good (the step's run
    fails and compensates, the item counts against its fan-out's tolerance, the
    compensation leaves its run ``compensation_failed``). Returns the unit, read again.

    ``unit`` and ``item``/``compensation`` name the work as for :func:`revoke_lease`.
    ``expected_attempt`` (numbered as every surface shows it, 0 for work never started)
    with ``expected_round`` (a step's round) and ``expected_status`` pin what the caller
    saw: a unit that moved on since is refused with :class:`InvalidTransition` and left
    alone. No ``expected_attempt``: the attempt (and round) it is in now. ``reason`` is
    kept in the error and the history with ``user``.
    """
    check_text(reason, field="reason")
    kind, unit_id = unit_of(unit, item, compensation)
    if expected_attempt is None:
        row = kind.model.objects.get(pk=unit_id)
        expected_attempt = shown_attempts(row).attempt
        expected_round = row.round if isinstance(row, Step) else None
    fail.fail_unit(
        kind,
        unit_id,
        expected_attempt=expected_attempt,
        expected_round=expected_round,
        expected_status=expected_status,
        reason=reason,
        user=user,
    )
    return kind.model.objects.get(pk=unit_id)
