"""Operator verbs on one step: retry it, or skip it (a gate's skip is a decision)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, cast

from workflows.approvals import (
    may_override_claim,
)
from workflows.definitions import Gate
from workflows.engine.verbs import retry, skip
from workflows.models import Step
from workflows.services.gates import skip_overrides_rule
from workflows.services.targets import step_of
from workflows.validation import check_json

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def retry_step(step: Step | int, *, user: AnyUser | None = None) -> Step:
    """Run a failed step again with fresh attempts; its failed run resumes."""
    target = step_of(step)
    retry.retry_step(target.pk, user=user)
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
