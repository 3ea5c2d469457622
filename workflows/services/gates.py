"""Deciding and claiming gates: the rule of who may decide one (checked before every
decision, claim, release and skip of a gate), the decision's selections and address."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_ipv46_address

from workflows.approvals import (
    decidable_by,
    may_override_claim,
    may_override_rule,
    signed_in,
)
from workflows.definitions import Gate
from workflows.definitions.gate import check_selections
from workflows.engine.nodes.gate import (
    claim_gate as claim_in_run,
    decide_gate,
    unclaim_gate as unclaim_in_run,
)
from workflows.errors import (
    GateAlreadyDecided,
    InvalidInput,
    InvalidTransition,
    StaleVersion,
)
from workflows.models import Step
from workflows.permissions import OVERRIDE_GATE_RULE
from workflows.queries.runs import traceparent_of
from workflows.services.targets import step_of
from workflows.status import Decision, StepStatus
from workflows.tracing import note_decision
from workflows.validation import check_text

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def _may_decide(step: Step, user: AnyUser) -> bool:
    """Whether the gate's rule (:func:`workflows.approvals.decidable_by`) admits ``user``."""
    return signed_in(user) and Step.objects.filter(pk=step.pk).filter(decidable_by(user)).exists()


def _rule_of(step: Step) -> str:
    """The gate's rule in words, for a refusal."""
    users = step.assignees.get("users", [])
    groups = step.assignees.get("groups", [])
    assignees = users + [f"group:{group}" for group in groups]
    needs = [f"permission {step.permission}"] if step.permission else []
    needs += [f"one of the assignees {assignees}"] if assignees else []
    return f"it needs {' or '.join(needs)}" if needs else "it admits any signed-in user"


def check_decider(step: Step, user: AnyUser) -> None:
    """Raise ``PermissionDenied`` unless ``user`` may decide this gate.

    The rule is :func:`workflows.approvals.decidable_by`, the filter the approvals list
    uses too: holders of the gate's permission, its assignees (by username, or by
    group), superusers; a gate naming no permission and no assignee accepts any
    signed-in user.
    """
    if not signed_in(user):
        raise PermissionDenied(f"deciding gate {step.name!r} needs a signed-in, active user")
    if not _may_decide(step, user):
        raise PermissionDenied(
            f"user {user.get_username()!r} may not decide gate {step.name!r}: {_rule_of(step)}"
        )


def skip_overrides_rule(gate: Step, user: AnyUser | None) -> bool:
    """Whether ``user`` skipping ``gate`` overrides its rule; refused if they may not.

    Skipping a gate decides it, so it is checked as a decision is: a user the gate's rule
    admits skips it as a decider (``False``); one it does not admit needs the separately
    granted ``workflows.override_gate_rule`` (``True``: an override, recorded as one);
    anyone else, and a skip without a signed-in user, gets ``PermissionDenied``. A gate
    carries its rule from the run's start, so a gate not yet reached is checked too.
    """
    if user is None or not signed_in(user):
        raise PermissionDenied(
            f"skipping gate {gate.name!r} decides it, which needs a signed-in, active user "
            "who may decide it"
        )
    if _may_decide(gate, user):
        return False
    if may_override_rule(user):
        return True
    raise PermissionDenied(
        f"user {user.get_username()!r} may not decide gate {gate.name!r} ({_rule_of(gate)}), "
        f"and skipping a gate decides it: that needs the gate's rule or permission "
        f"{OVERRIDE_GATE_RULE}"
    )


def _gate(step: Step) -> None:
    if step.kind != Gate.kind:
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
    """Check selections against the waiting gate's options and its min/max counts."""
    allowed = [option["value"] for option in step.options]
    return check_selections(
        step.name, allowed, step.min_selections, step.max_selections, selections
    )


def clean_address(address: str | None) -> str | None:
    """The caller's IP address as the database stores it (IPv6 compressed), or ``None``.

    Anything but ``None`` or an IPv4/IPv6 address string raises :class:`InvalidInput`.
    """
    if address is None:
        return None
    try:
        if not isinstance(address, str):
            raise ValidationError("not a string")
        validate_ipv46_address(address)
    except ValidationError:
        raise InvalidInput(
            f"address must be an IPv4 or IPv6 address or None, got {address!r}"
        ) from None
    return Step._meta.get_field("decided_from").to_python(address)


def approve_gate(
    step: Step | int,
    *,
    user: AnyUser,
    selections: Sequence[str] | None = None,
    feedback: str = "",
    address: str | None = None,
    expected_version: int | None = None,
) -> Step:
    """Approve a waiting gate; of two racing decisions exactly one wins.

    ``address``: the IP address the decision came from, kept on the step and in the
    ``gate.decided`` event with who and when. ``expected_version``: the gate's version
    the decider saw (a form, a signed link, an API client); if the gate changed since
    (a claim taken or released, a decision), :class:`StaleVersion` is raised, checked
    again by the engine's compare-and-set under the run lock. Raises ``PermissionDenied``,
    :class:`InvalidDecision` (bad selections), :class:`InvalidInput` (bad address),
    :class:`GateClaimed` (someone else claimed it and ``user`` may not override claims)
    or :class:`GateAlreadyDecided`; nothing is written then.
    """
    gate = _decidable(step, user)
    chosen = clean_selections(gate, selections)
    return _decide(
        gate,
        Decision.APPROVED,
        user=user,
        selections=chosen,
        feedback=feedback,
        address=address,
        expected_version=expected_version,
    )


def _seen_version(gate: Step, expected_version: int | None) -> int:
    """The version a decision is made against: what the decider saw, if they say."""
    if expected_version is None:
        return gate.version
    if expected_version != gate.version:
        raise StaleVersion(
            f"gate {gate.name!r} changed since version {expected_version} (it is at "
            f"{gate.version}): read it again before deciding",
            step=gate.name,
            expected_version=expected_version,
            version=gate.version,
        )
    return expected_version


def reject_gate(
    step: Step | int,
    *,
    user: AnyUser,
    feedback: str = "",
    address: str | None = None,
    expected_version: int | None = None,
) -> Step:
    """Reject a waiting gate: the step (and by default the run) fails and compensates.

    Refused as :func:`approve_gate` is, for the same reasons.
    """
    return _decide(
        _decidable(step, user),
        Decision.REJECTED,
        user=user,
        feedback=feedback,
        address=address,
        expected_version=expected_version,
    )


def _decidable(step: Step | int, user: AnyUser) -> Step:
    """The gate ``step`` names, if ``user`` may decide it and it still waits; else the
    refusal (not a gate, ``PermissionDenied``, :class:`GateAlreadyDecided`)."""
    gate = step_of(step)
    _gate(gate)
    check_decider(gate, user)
    _waiting(gate)
    return gate


def _decide(
    gate: Step,
    decision: Decision,
    *,
    user: AnyUser,
    feedback: str,
    address: str | None,
    expected_version: int | None,
    selections: list[str] | None = None,
) -> Step:
    """Record ``decision`` on ``gate`` once the feedback, the address and the version
    seen pass; the step as it is then."""
    check_text(feedback, field="feedback")
    decide_gate(
        gate.pk,
        version=_seen_version(gate, expected_version),
        decision=decision,
        user=user,
        selections=selections,
        feedback=feedback,
        address=clean_address(address),
        may_override=partial(may_override_claim, user),
    )
    note_decision(
        f"workflow.gate.{decision}",
        partial(traceparent_of, gate.run_id),
        lambda: {
            "flowsite.run.id": str(gate.run_id),
            "flowsite.step.name": gate.name,
            "flowsite.gate.decision": str(decision),
        },
    )
    return step_of(gate)


def claim_gate(step: Step | int, user: AnyUser, *, address: str | None = None) -> Step:
    """Claim a waiting gate for ``user``, who says they are deciding it.

    Until it is released, others may not decide it unless they hold the permission
    ``workflows.override_gate_claim``. Claiming one's own claim again changes nothing.
    Only users who may decide the gate may claim it (``PermissionDenied``); a gate
    claimed by someone else raises :class:`GateClaimed`, a decided or timed-out one
    :class:`GateAlreadyDecided`, a bad address :class:`InvalidInput`; nothing is
    written then. Of two racing claims exactly one wins.
    """
    gate = step_of(step)
    _gate(gate)
    cleaned = clean_address(address)
    check_decider(gate, user)
    _waiting(gate)
    claim_in_run(gate.pk, user, address=cleaned)
    return step_of(gate)


def unclaim_gate(step: Step | int, user: AnyUser, *, address: str | None = None) -> Step:
    """Release the claim on a waiting gate; releasing an unclaimed gate changes nothing.

    Only users who may decide the gate may release a claim on it (``PermissionDenied``,
    as for claiming: the override permission alone does not make its holder one of the
    gate's deciders). ``user`` releases their own claim; someone else's also needs the
    permission ``workflows.override_gate_claim`` (else :class:`GateClaimed`). Raises
    :class:`GateAlreadyDecided` for a gate no longer waiting, :class:`InvalidInput` for a
    bad address; nothing is written then.
    """
    gate = step_of(step)
    _gate(gate)
    cleaned = clean_address(address)
    check_decider(gate, user)
    _waiting(gate)
    unclaim_in_run(gate.pk, user, address=cleaned, may_override=partial(may_override_claim, user))
    return step_of(gate)
