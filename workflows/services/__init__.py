"""Public verbs: what the admin, the API, commands and user code call.

Each verb validates its input (and who is asking) and delegates to one engine
transition; none writes workflow state itself. What they read is in
:mod:`workflows.queries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any
from uuid import UUID

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_ipv46_address
from django.db import models

from workflows import engine
from workflows.approvals import (
    OVERRIDE_RULE_PERMISSION,
    decidable_by,
    may_override_claim,
    may_override_rule,
    signed_in,
)
from workflows.definitions import Gate, WaitForSignal, Workflow, registry
from workflows.definitions.gate import check_selections
from workflows.definitions.limits import priority_problems
from workflows.engine import operator_verbs, pause, rerun, terminate
from workflows.engine.callbacks import resolve_callback
from workflows.engine.children import cancel_children, terminate_children
from workflows.engine.gates import claim_gate as claim_in_run
from workflows.engine.gates import decide_gate
from workflows.engine.gates import unclaim_gate as unclaim_in_run
from workflows.engine.guards import PRIORITY
from workflows.engine.priority import change_priority as set_priority
from workflows.engine.signals import send_signal as deliver_signal
from workflows.errors import (
    DefinitionError,
    DefinitionMissing,
    GateAlreadyDecided,
    InvalidInput,
    InvalidTransition,
    StaleVersion,
    UnknownSignal,
)
from workflows.models import Run, Signal, Step
from workflows.queries import get_run, get_step
from workflows.status import Decision, RunStatus, StepStatus
from workflows.validation import check_json, check_text, max_length

__all__ = [
    "approve_gate",
    "cancel_run",
    "change_priority",
    "claim_gate",
    "complete_callback",
    "fail_callback",
    "pause_run",
    "reject_gate",
    "rerun_from",
    "resume_run",
    "retry_run",
    "retry_step",
    "send_signal",
    "skip_step",
    "start_run",
    "terminate_run",
    "unclaim_gate",
]


def start_run(
    workflow: str | type[Workflow],
    input: dict[str, Any] | None = None,
    *,
    idempotency_key: str | None = None,
    business_key: str | None = None,
    user: Any = None,
    subject: models.Model | None = None,
    priority: int | None = None,
) -> Run:
    """Start a run of ``workflow`` (a registered name, latest version, or a class).

    With an ``idempotency_key`` seen before for this workflow, the existing run is
    returned when the input is the same, and :class:`IdempotencyConflict` raised when
    it differs; of two concurrent starts with one key, one creates the run and the
    other returns it. Input that is not storable JSON and keys that are not strings,
    hold a NUL character or exceed their column raise :class:`InvalidInput` before
    anything is written (see :mod:`workflows.validation`).

    ``subject`` ties the run to one of the host's saved model instances (see
    ``Run.objects.for_object``); an unsaved instance or any other value is
    :class:`InvalidInput`. It is not part of the idempotency fingerprint, and child
    runs do not inherit it.

    ``priority`` (-1000 to 1000; default the workflow's ``default_priority``) orders
    the run's ready work, and the run in its workflow's queue while it waits for a
    place under ``max_concurrent_runs``; anything else is :class:`InvalidInput`.
    """
    definition = registry.resolve(workflow)
    if priority is not None:
        _check_priority(priority)
    check_text(
        definition.name,
        field=f"the name of {definition.label()}",
        limit=max_length(Run, "workflow_name"),
        error=DefinitionError,
    )
    if isinstance(input, dict):  # anything else is refused by the definition's check_input
        check_json(input, field="input")
    if idempotency_key is not None:
        check_text(
            idempotency_key, field="idempotency key", limit=max_length(Run, "idempotency_key")
        )
    if business_key is not None:
        check_text(business_key, field="business key", limit=max_length(Run, "business_key"))
    if subject is not None:
        _check_subject(subject)
    return engine.start_run(
        workflow,
        input,
        idempotency_key=idempotency_key,
        business_key=business_key,
        user=user,
        subject=subject,
        priority=priority,
    )


def _check_priority(value: Any) -> None:
    problems = priority_problems(value)
    if problems:
        raise InvalidInput(problems[0], field="priority")


def _check_subject(subject: Any) -> None:
    """Refuse what a generic relation cannot point at: a non-model or an unsaved row.

    ``_state.adding`` rather than ``pk is None``: a model whose key defaults to
    ``uuid4`` has a key before it is saved, and a run pointing at it would dangle.
    """
    if not isinstance(subject, models.Model):
        raise InvalidInput(f"subject must be a saved model instance, got {type(subject).__name__}")
    if subject._state.adding or subject.pk is None:
        raise InvalidInput(
            f"subject {subject._meta.label} is not saved: save it before starting a run about it"
        )
    check_text(str(subject.pk), field="subject's primary key", limit=max_length(Run, "subject_id"))


def _step(step: Step | int) -> Step:
    return get_step(step.pk if isinstance(step, Step) else step)


def _run_id(run: Run | UUID | str) -> UUID:
    return run.pk if isinstance(run, Run) else get_run(run).pk


def _may_decide(step: Step, user: Any) -> bool:
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


def check_decider(step: Step, user: Any) -> None:
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


def _skip_overrides_rule(gate: Step, user: Any) -> bool:
    """Whether ``user`` skipping ``gate`` overrides its rule; refused if they may not.

    Skipping a gate decides it, so it is checked as a decision is: a user the gate's rule
    admits skips it as a decider (``False``); one it does not admit needs the separately
    granted ``workflows.override_gate_rule`` (``True``: an override, recorded as one);
    anyone else, and a skip without a signed-in user, gets ``PermissionDenied``. A gate
    carries its rule from the run's start, so a gate not yet reached is checked too.
    """
    if not signed_in(user):
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
        f"{OVERRIDE_RULE_PERMISSION}"
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
    user: Any,
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
    gate = _step(step)
    _gate(gate)
    check_decider(gate, user)
    _waiting(gate)
    chosen = clean_selections(gate, selections)
    check_text(feedback, field="feedback")
    decide_gate(
        gate.pk,
        version=_seen_version(gate, expected_version),
        decision=Decision.APPROVED,
        user=user,
        selections=chosen,
        feedback=feedback,
        address=clean_address(address),
        may_override=partial(may_override_claim, user),
    )
    return _step(gate)


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
    user: Any,
    feedback: str = "",
    address: str | None = None,
    expected_version: int | None = None,
) -> Step:
    """Reject a waiting gate: the step (and by default the run) fails and compensates.

    Refused as :func:`approve_gate` is, for the same reasons.
    """
    gate = _step(step)
    _gate(gate)
    check_decider(gate, user)
    _waiting(gate)
    check_text(feedback, field="feedback")
    decide_gate(
        gate.pk,
        version=_seen_version(gate, expected_version),
        decision=Decision.REJECTED,
        user=user,
        feedback=feedback,
        address=clean_address(address),
        may_override=partial(may_override_claim, user),
    )
    return _step(gate)


def claim_gate(step: Step | int, user: Any, *, address: str | None = None) -> Step:
    """Claim a waiting gate for ``user``, who says they are deciding it.

    Until it is released, others may not decide it unless they hold the permission
    ``workflows.override_gate_claim``. Claiming one's own claim again changes nothing.
    Only users who may decide the gate may claim it (``PermissionDenied``); a gate
    claimed by someone else raises :class:`GateClaimed`, a decided or timed-out one
    :class:`GateAlreadyDecided`, a bad address :class:`InvalidInput`; nothing is
    written then. Of two racing claims exactly one wins.
    """
    gate = _step(step)
    _gate(gate)
    cleaned = clean_address(address)
    check_decider(gate, user)
    _waiting(gate)
    claim_in_run(gate.pk, user, address=cleaned)
    return _step(gate)


def unclaim_gate(step: Step | int, user: Any, *, address: str | None = None) -> Step:
    """Release the claim on a waiting gate; releasing an unclaimed gate changes nothing.

    Only users who may decide the gate may release a claim on it (``PermissionDenied``,
    as for claiming: the override permission alone does not make its holder one of the
    gate's deciders). ``user`` releases their own claim; someone else's also needs the
    permission ``workflows.override_gate_claim`` (else :class:`GateClaimed`). Raises
    :class:`GateAlreadyDecided` for a gate no longer waiting, :class:`InvalidInput` for a
    bad address; nothing is written then.
    """
    gate = _step(step)
    _gate(gate)
    cleaned = clean_address(address)
    check_decider(gate, user)
    _waiting(gate)
    unclaim_in_run(gate.pk, user, address=cleaned, may_override=partial(may_override_claim, user))
    return _step(gate)


def send_signal(
    run: Run | UUID | str,
    name: str,
    payload: Any = None,
    *,
    idempotency_key: str | None = None,
    user: Any = None,
) -> Signal:
    """Send signal ``name`` to a run; kept until a ``WaitForSignal`` step consumes it.

    ``user``, when given, is recorded in the run's history as who sent it.

    Refused before anything is written: a name no ``WaitForSignal`` step of the run's
    definition waits for (:class:`UnknownSignal`, listing the names it does wait for),
    and a name, key or payload the database cannot store (:class:`InvalidInput`).
    """
    target = run if isinstance(run, Run) else get_run(run)
    check_text(name, field="signal name", limit=max_length(Signal, "name"))
    if idempotency_key is not None:
        check_text(
            idempotency_key,
            field="signal idempotency key",
            limit=max_length(Signal, "idempotency_key"),
        )
    check_json(payload, field="signal payload")
    waited_for = signals_waited_for(target)
    if name not in waited_for:
        raise UnknownSignal(
            f"run {target.pk} of {target.workflow_name!r} v{target.workflow_version} never "
            f"waits for signal {name!r}; "
            + (
                f"it waits for {', '.join(repr(known) for known in waited_for)}"
                if waited_for
                else "it waits for no signal"
            ),
            run=str(target.pk),
            signal=name,
            waits_for=waited_for,
        )
    return deliver_signal(
        target.pk,
        name,
        payload,
        idempotency_key=idempotency_key,
        sent_by=user.get_username() if user is not None else None,
    )


def signals_waited_for(run: Run) -> list[str]:
    """The signal names the ``WaitForSignal`` steps of the run's pinned definition wait for.

    Read from the registered (name, version); for a run whose definition is not
    registered here, from the graph snapshot stored on the run, and if that does not
    list its steps' kinds, :class:`DefinitionMissing` is raised.
    """
    try:
        definition = registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing:
        return _signals_in_snapshot(run)
    return list(
        dict.fromkeys(
            node.signal for node in definition.nodes.values() if isinstance(node, WaitForSignal)
        )
    )


def _signals_in_snapshot(run: Run) -> list[str]:
    steps = run.snapshot.get("steps") if isinstance(run.snapshot, dict) else None
    readable = isinstance(steps, list) and all(
        isinstance(step, dict)
        and isinstance(step.get("kind"), str)
        and (step["kind"] != WaitForSignal.kind or isinstance(step.get("signal"), str))
        for step in steps
    )
    if not readable:
        raise DefinitionMissing(
            f"workflow {run.workflow_name!r} v{run.workflow_version} of run {run.pk} is not "
            "registered in this process and the run's snapshot does not list its steps' "
            "kinds, so the signals it waits for are unknown",
            workflow=run.workflow_name,
            version=run.workflow_version,
        )
    return list(
        dict.fromkeys(step["signal"] for step in steps if step["kind"] == WaitForSignal.kind)
    )


def complete_callback(token: str, output: Any = None) -> None:
    """Resolve a parked task with ``output``; a bad, expired or reused token is refused.

    ``output`` is checked as a handler's output is; :class:`InvalidInput` if the
    database cannot store it, and nothing is written.
    """
    check_json(output, field="callback output")
    resolve_callback(token, output=output)


def fail_callback(token: str, error: str) -> None:
    """Fail the attempt a callback token names (retried per the task's policy).

    ``error`` is a string the database can store, else :class:`InvalidInput`.
    """
    check_text(error, field="callback error")
    resolve_callback(token, error=error or "callback failed")


def cancel_run(
    run: Run | UUID | str, *, reason: str = "", compensate: bool = True, user: Any = None
) -> Run:
    """Cancel a running or waiting run (and its children); compensate unless told not to."""
    check_text(reason, field="cancel reason")
    run_id = _run_id(run)
    operator_verbs.cancel_run(run_id, reason=reason, compensate=compensate, user=user)
    cancel_children(run_id)
    return Run.objects.get(pk=run_id)


def retry_step(step: Step | int, *, user: Any = None) -> Step:
    """Run a failed step again with fresh attempts; its failed run resumes."""
    target = _step(step)
    operator_verbs.retry_step(target.pk, user=user)
    return _step(target)


def skip_step(step: Step | int, *, user: Any = None, output: Any = None) -> Step:
    """Record a step as done with ``output`` without running it; the run moves on.

    ``output`` is checked as a handler's output is: :class:`InvalidInput` if the
    database cannot store it, and nothing is written. Skipping a gate decides it: only
    a user the gate's rule admits may, or a holder of ``workflows.override_gate_rule``
    (recorded as an override), else ``PermissionDenied``; ``output`` is then the decision
    (``{"decision", "selections", "feedback"}``, :class:`InvalidDecision` if it does not
    fit the gate's options) and a claim by someone else is respected as by a decision.
    """
    target = _step(step)
    check_json(output, field="output of the skipped step")
    if target.kind == Gate.kind:
        operator_verbs.skip_gate(
            target.pk,
            output=output,
            user=user,
            overriding=_skip_overrides_rule(target, user),
            may_override_claim=partial(may_override_claim, user),
        )
    else:
        operator_verbs.skip_step(target.pk, output=output, user=user)
    return _step(target)


def retry_run(run: Run | UUID | str, *, user: Any = None) -> Run:
    """Retry every failed step of a failed run, or resume its failed compensations."""
    run_id = _run_id(run)
    operator_verbs.retry_run(run_id, user=user)
    return Run.objects.get(pk=run_id)


def pause_run(run: Run | UUID | str, *, reason: str = "", user: Any = None) -> Run:
    """Pause a run: nothing new starts, running work finishes and is recorded, timers
    that come due wait for :func:`resume_run` (and then fire once)."""
    check_text(reason, field="pause reason")
    run_id = _run_id(run)
    pause.pause_run(run_id, reason=reason, user=user)
    return Run.objects.get(pk=run_id)


def resume_run(run: Run | UUID | str, *, user: Any = None) -> Run:
    """Resume a paused run: what ended meanwhile is settled, its work starts again."""
    run_id = _run_id(run)
    pause.resume_run(run_id, user=user)
    return Run.objects.get(pk=run_id)


def terminate_run(run: Run | UUID | str, *, reason: str = "", user: Any = None) -> Run:
    """Stop a run (and its children) at once, without compensation; running attempts
    lose their lease. :func:`cancel_run` is the verb that compensates."""
    check_text(reason, field="terminate reason")
    run_id = _run_id(run)
    terminate.terminate_run(run_id, reason=reason, user=user)
    terminate_children(run_id)
    return Run.objects.get(pk=run_id)


def rerun_from(
    run: Run | UUID | str, step: Step | int | str, *, reason: str = "", user: Any = None
) -> Run:
    """Run ``step`` (a step, its id, or its name) and everything downstream of it again.

    For failed, completed and cancelled runs; upstream outputs are kept, the reset steps
    get new idempotency keys and fresh attempts. See
    :func:`workflows.engine.rerun.rerun_from` for when it is refused.
    """
    check_text(reason, field="rerun reason")
    run_id = _run_id(run)
    if isinstance(step, str) and not step.isdigit():
        name = step
    else:
        target = _step(step if isinstance(step, Step) else int(step))
        if target.run_id != run_id:
            raise InvalidInput(f"step {target.pk} belongs to run {target.run_id}, not {run_id}")
        name = target.name
    rerun.rerun_from(run_id, name, reason=reason, user=user)
    return Run.objects.get(pk=run_id)


def change_priority(run: Run | UUID | str, priority: int, *, user: Any = None) -> Run:
    """Give a run (and its live child runs) another priority, -1000 to 1000.

    The run's unstarted steps, fan-out items and compensations whose node declares no
    priority of its own take the new one; a queued run moves in its workflow's queue.
    The history records who changed it (``run.priority_changed``). Refused for a run
    that has ended (:class:`InvalidTransition`) and for a priority out of range or not
    an integer (:class:`InvalidInput`). Children are changed after the parent, each in
    its own transition (a child is never locked while its parent is held); a child that
    ends meanwhile is left as it is.
    """
    _check_priority(priority)
    run_id = _run_id(run)
    set_priority(run_id, priority, user=user)
    _change_children(run_id, priority, user)
    return Run.objects.get(pk=run_id)


def _change_children(run_id: UUID, priority: int, user: Any) -> None:
    live = PRIORITY.accepts - {RunStatus.QUEUED}  # children are never queued
    for child_id in Run.objects.filter(parent_run_id=run_id, status__in=live).values_list(
        "id", flat=True
    ):
        try:
            set_priority(child_id, priority, user=user)
        except InvalidTransition:  # it ended meanwhile
            continue
        _change_children(child_id, priority, user)
