"""Public verbs: what the admin, the API, commands and user code call.

Each verb validates its input (and who is asking) and delegates to one engine
transition; none writes workflow state itself. What they read is in
:mod:`workflows.queries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from django.core.exceptions import PermissionDenied

from workflows.engine import operator, start_run
from workflows.engine.callbacks import resolve_callback
from workflows.engine.gates import decide_gate
from workflows.engine.signals import send_signal as deliver_signal
from workflows.errors import GateAlreadyDecided, InvalidDecision, InvalidTransition
from workflows.models import Run, Signal, Step
from workflows.queries import get_run, get_step
from workflows.status import Decision, StepStatus

__all__ = [
    "approve_gate",
    "cancel_run",
    "complete_callback",
    "fail_callback",
    "reject_gate",
    "retry_run",
    "retry_step",
    "send_signal",
    "skip_step",
    "start_run",
]


def _step(step: Step | int) -> Step:
    return get_step(step.pk if isinstance(step, Step) else step)


def _run_id(run: Run | UUID | str) -> UUID:
    return run.pk if isinstance(run, Run) else get_run(run).pk


def check_decider(step: Step, user: Any) -> None:
    """Raise ``PermissionDenied`` unless ``user`` may decide this gate.

    A gate naming a permission or assignees accepts users holding the permission or
    listed (by username, or by group); a gate naming neither accepts any signed-in user.
    """
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        raise PermissionDenied(f"deciding gate {step.name!r} needs a signed-in, active user")
    users = step.assignees.get("users", [])
    groups = step.assignees.get("groups", [])
    if not (step.permission or users or groups):
        return
    if step.permission and user.has_perm(step.permission):
        return
    if user.get_username() in users or (groups and user.groups.filter(name__in=groups).exists()):
        return
    assignees = users + [f"group:{group}" for group in groups]
    raise PermissionDenied(
        f"user {user.get_username()!r} may not decide gate {step.name!r}: it needs permission "
        f"{step.permission or '(none)'} or one of the assignees {assignees}"
    )


def _gate(step: Step) -> None:
    if step.kind != "gate":
        raise InvalidTransition(f"step {step.name!r} is a {step.kind}, not a gate")


def _waiting(step: Step) -> None:
    if step.status != StepStatus.WAITING:
        raise GateAlreadyDecided(
            f"gate {step.name!r} is {step.status}"
            + (f" ({step.decision})" if step.decision else "")
            + ", no longer waiting for a decision",
            step=step.name,
            status=step.status,
            decision=step.decision,
        )


def clean_selections(step: Step, selections: Sequence[str] | None) -> list[str]:
    """Check selections against the gate's options and its min/max counts."""
    chosen = list(selections or [])
    allowed = [option["value"] for option in step.options]
    unknown = [value for value in chosen if value not in allowed]
    if unknown:
        raise InvalidDecision(
            f"gate {step.name!r} has no option {unknown[0]!r}; allowed: {allowed}",
            allowed=allowed,
        )
    if len(set(chosen)) != len(chosen):
        raise InvalidDecision(f"gate {step.name!r}: an option was selected twice: {chosen}")
    low, high = step.min_selections, step.max_selections
    if len(chosen) < low or (high is not None and len(chosen) > high):
        span = (
            f"at least {low}"
            if high is None
            else f"exactly {low}"
            if low == high
            else f"{low} to {high}"
        )
        raise InvalidDecision(
            f"gate {step.name!r} needs {span} selections, got {len(chosen)}",
            allowed=allowed,
        )
    return chosen


def approve_gate(
    step: Step | int, *, user: Any, selections: Sequence[str] | None = None, feedback: str = ""
) -> Step:
    """Approve a waiting gate; of two racing decisions exactly one wins.

    Raises ``PermissionDenied``, :class:`InvalidDecision` (bad selections) or
    :class:`GateAlreadyDecided`; nothing is written then.
    """
    gate = _step(step)
    _gate(gate)
    check_decider(gate, user)
    _waiting(gate)
    chosen = clean_selections(gate, selections)
    decide_gate(
        gate.pk,
        version=gate.version,
        decision=Decision.APPROVED,
        user=user,
        selections=chosen,
        feedback=feedback,
    )
    return _step(gate)


def reject_gate(step: Step | int, *, user: Any, feedback: str = "") -> Step:
    """Reject a waiting gate: the step (and by default the run) fails and compensates."""
    gate = _step(step)
    _gate(gate)
    check_decider(gate, user)
    _waiting(gate)
    decide_gate(
        gate.pk, version=gate.version, decision=Decision.REJECTED, user=user, feedback=feedback
    )
    return _step(gate)


def send_signal(
    run: Run | UUID | str, name: str, payload: Any = None, *, idempotency_key: str | None = None
) -> Signal:
    """Send signal ``name`` to a run; kept until a ``WaitForSignal`` step consumes it."""
    return deliver_signal(_run_id(run), name, payload, idempotency_key=idempotency_key)


def complete_callback(token: str, output: Any = None) -> None:
    """Resolve a parked task with ``output``; a bad, expired or reused token is refused."""
    resolve_callback(token, output=output)


def fail_callback(token: str, error: str) -> None:
    """Fail the attempt a callback token names (retried per the task's policy)."""
    resolve_callback(token, error=str(error) or "callback failed")


def cancel_run(
    run: Run | UUID | str, *, reason: str = "", compensate: bool = True, user: Any = None
) -> Run:
    """Cancel a running or waiting run (and its children); compensate unless told not to."""
    from workflows.engine.children import cancel_children

    run_id = _run_id(run)
    operator.cancel_run(run_id, reason=reason, compensate=compensate, user=user)
    cancel_children(run_id)
    return Run.objects.get(pk=run_id)


def retry_step(step: Step | int, *, user: Any = None) -> Step:
    """Run a failed step again with fresh attempts; its failed run resumes."""
    target = _step(step)
    operator.retry_step(target.pk, user=user)
    return _step(target)


def skip_step(step: Step | int, *, user: Any = None, output: Any = None) -> Step:
    """Record a step as done with ``output`` without running it; the run moves on."""
    target = _step(step)
    operator.skip_step(target.pk, output=output, user=user)
    return _step(target)


def retry_run(run: Run | UUID | str, *, user: Any = None) -> Run:
    """Retry every failed step of a failed run, or resume its failed compensations."""
    run_id = _run_id(run)
    operator.retry_run(run_id, user=user)
    return Run.objects.get(pk=run_id)
