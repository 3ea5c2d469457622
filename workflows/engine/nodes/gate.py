"""Gates: entering one (render the prompt, wait, arm the timeout), claiming and deciding it.

Decisions, claims and releases of one gate all lock its run first, so they serialise;
each re-reads the gate under that lock and compare-and-sets it from ``waiting`` at the
version it read there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from workflows.definitions import Gate
from workflows.engine.advance import Advancer, enters
from workflows.engine.scope import run_of_step, run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.sql.updates import cas_update
from workflows.engine.timers import cancel_timers, fires
from workflows.engine.transaction import transition
from workflows.errors import GateAlreadyDecided, GateClaimed, StaleState
from workflows.models import Run, Step
from workflows.permissions import OVERRIDE_GATE_CLAIM
from workflows.status import RUN_ALIVE, Decision, DecisionVia, StepStatus, TimerKind

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class _Outputs(Mapping[str, Any]):
    """``{steps[name]}`` in a prompt: earlier outputs, loaded on use."""

    def __init__(self, advancer: Advancer) -> None:
        self._steps = advancer.context.steps

    def __getitem__(self, name: str) -> Any:
        return self._steps[name].output

    def __iter__(self) -> Iterator[str]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)


@enters(Gate)
def enter_gate(advancer: Advancer, row: StepRow, node: Gate) -> str:
    """Park the gate ``waiting`` with its rendered prompt, options and deciders."""
    try:
        prompt = node.prompt.format_map({"input": advancer.run.input, "steps": _Outputs(advancer)})
    except (KeyError, IndexError, AttributeError, ValueError) as exc:
        return advancer.fail_entering(row, exc, "prompt_error")
    due_at = timezone.now() + node.timeout if node.timeout is not None else None
    advancer.park(
        row,
        TimerKind.GATE_TIMEOUT,
        due_at,
        reason=Gate.kind,
        changes={
            "prompt": prompt,
            "options": [option.as_dict() for option in node.options],
            "min_selections": node.min_selections,
            "max_selections": node.max_selections,
            **node.step_columns(),
            # A gate entered again (a retried or rerun run) starts unclaimed.
            "claimed_by": None,
            "claimed_at": None,
            "decided_from": None,
        },
    )
    return StepStatus.WAITING


def decision_output(
    decision: str, *, by: str | None, selections: list[str], feedback: str
) -> dict[str, Any]:
    """The step output of a decided gate, which later steps can branch on."""
    return {
        "decision": decision,
        "by": by,
        "at": timezone.now().isoformat(),
        "selections": selections,
        "feedback": feedback,
    }


def stamp(user: AnyUser | None, address: str | None, at: datetime) -> dict[str, Any]:
    """Who, when and from which address: what every decision and claim event records."""
    return {
        "by": user.get_username() if user is not None else None,
        "at": at.isoformat(),
        "address": address,
    }


def _still_waiting(run: Run, row: StepRow) -> None:
    """Refuse a gate that was decided, timed out or cancelled, or whose run is over."""
    if row.status != StepStatus.WAITING or run.status not in RUN_ALIVE:
        raise GateAlreadyDecided(
            f"gate {row.name!r} is {row.status}, no longer waiting for a decision",
            step=row.name,
            status=row.status,
        )


def _claim_of(step_id: int) -> tuple[int | None, str | None]:
    """The id and username of whoever holds the gate's claim, read under the run's lock."""
    return Step.objects.values_list(
        "claimed_by_id", f"claimed_by__{get_user_model().USERNAME_FIELD}"
    ).get(pk=step_id)


def _refuse_claimed(row: StepRow, claimer: str | None, action: str) -> None:
    raise GateClaimed(
        f"gate {row.name!r} is claimed by {claimer}; only they, or a user with permission "
        f"{OVERRIDE_GATE_CLAIM}, may {action} it",
        step=row.name,
        claimed_by=claimer,
    )


def respect_claim(
    row: StepRow, user: AnyUser | None, may_override: Callable[[], bool] | None, action: str
) -> str | None:
    """Refuse ``action`` on a gate someone else claimed, unless ``may_override()``.

    Read under the run's lock. Returns the claimer's username when ``user`` overrides
    their claim (``None``: no claim, or ``user``'s own), for the history to record.
    """
    claimer_id, claimer = _claim_of(row.pk)
    if claimer_id is None or (user is not None and claimer_id == user.pk):
        return None
    if not (may_override is not None and may_override()):
        _refuse_claimed(row, claimer, action)
    return claimer


@transition
def decide_gate(
    step_id: int,
    *,
    version: int,
    decision: str,
    user: AnyUser | None = None,
    selections: list[str] | None = None,
    feedback: str = "",
    reason: str = "",
    address: str | None = None,
    may_override: Callable[[], bool] | None = None,
) -> None:
    """Record an approval or rejection on a waiting gate; of two racing decisions one wins.

    How it loses a race (nothing is written for the loser): the second of two decisions
    finds the gate decided and gets :class:`GateAlreadyDecided`; a decision behind a
    claim by someone else that committed first gets :class:`GateClaimed`, unless
    ``may_override()`` says the caller may override claims (asked only then); a decision
    that finds the gate
    otherwise changed since ``version`` (a claim released or taken, the gate entered
    again) gets :class:`StaleState` and reads it again. A rejection fails the step and
    the run unless the gate routes on rejections (``on_reject="continue"``).
    """
    with run_scope(run_of_step(step_id)) as scope:
        run, row = scope.run, step_row(step_id)
        _still_waiting(run, row)
        overridden = respect_claim(row, user, may_override, "decide")
        if row.version != version:
            raise StaleState(
                f"gate {row.name!r} changed since it was read (claimed, released or entered "
                "again); nothing was written",
                step=row.name,
            )
        node = scope.workflow.nodes[row.name]
        assert isinstance(node, Gate)
        advancer = scope.advancer
        username = user.get_username() if user is not None else None
        output = decision_output(
            decision, by=username, selections=selections or [], feedback=feedback
        )
        at = timezone.now()
        fields = {
            "decision": decision,
            "decided_via": DecisionVia.DECISION,
            "decided_by": user,
            "decided_at": at,
            "decided_from": address,
            "feedback": feedback,
            "selections": selections or [],
            "output": output,
        }
        cancel_timers(row.pk, TimerKind.GATE_TIMEOUT)
        payload = {
            "decision": decision,
            **stamp(user, address, at),
            **({"reason": reason} if reason else {}),
            **({"overrode_claim_of": overridden} if overridden is not None else {}),
        }
        rejected = (
            f"gate {row.name!r} was rejected"
            + (f" by {username}" if username else "")
            + (f": {feedback}" if feedback else "")
        )
        _record_decision(advancer, row, node, fields, payload, rejected=rejected)


@transition
def claim_gate(step_id: int, user: AnyUser, *, address: str | None = None) -> bool:
    """Claim a waiting gate for ``user``: until it is released, others may not decide it.

    Returns ``False``, writing nothing, when ``user`` already holds the claim. How it
    loses a race (nothing is written for the loser): the second of two claims reads the
    first's committed claim under the run's lock and gets :class:`GateClaimed`; a claim
    behind a decision or timeout that committed first gets :class:`GateAlreadyDecided`.
    The compare-and-set restates the gate ``waiting`` and unclaimed at the version read.
    """
    with run_scope(run_of_step(step_id)) as scope:
        run, row = scope.run, step_row(step_id)
        _still_waiting(run, row)
        claimer_id, claimer = _claim_of(step_id)
        if claimer_id == user.pk:
            return False
        if claimer_id is not None:
            _refuse_claimed(row, claimer, "claim")
        at = timezone.now()
        _write_claim(row, None, user, at, "claimed")
        scope.events.add(run.pk, "gate.claimed", step_id=row.pk, **stamp(user, address, at))
    return True


@transition
def unclaim_gate(
    step_id: int,
    user: AnyUser,
    *,
    address: str | None = None,
    may_override: Callable[[], bool] | None = None,
) -> bool:
    """Release the claim on a waiting gate: anyone who may decide it may claim it again.

    ``user`` releases their own claim, or someone else's if ``may_override()`` says so.
    Returns ``False``, writing nothing, when nobody holds the claim. How it loses a race
    (nothing is written for the loser): behind a decision or timeout that committed first
    it gets :class:`GateAlreadyDecided`; behind another user's claim that committed first
    it gets :class:`GateClaimed` unless ``may_override()``. The compare-and-set restates
    the gate ``waiting`` and held by that claimer at the version read.
    """
    with run_scope(run_of_step(step_id)) as scope:
        run, row = scope.run, step_row(step_id)
        _still_waiting(run, row)
        claimer_id, claimer = _claim_of(step_id)
        if claimer_id is None:
            return False
        if claimer_id != user.pk and not (may_override is not None and may_override()):
            _refuse_claimed(row, claimer, "release")
        at = timezone.now()
        _write_claim(row, claimer_id, None, None, "released")
        scope.events.add(
            run.pk,
            "gate.unclaimed",
            step_id=row.pk,
            **stamp(user, address, at),
            claimed_by=claimer,
        )
    return True


@fires(TimerKind.GATE_TIMEOUT)
def time_out_gate(advancer: Advancer, row: StepRow) -> None:
    """Apply ``on_timeout`` to a gate whose timer fired while it was still waiting."""
    events, run = advancer.events, advancer.run
    node = advancer.workflow.nodes[row.name]
    assert isinstance(node, Gate)
    if node.on_timeout == "fail":
        error = {"code": "gate_timed_out", "message": f"gate {row.name!r} timed out"}
        advancer.move(row, StepStatus.TIMED_OUT, error=error, finished_at=timezone.now())
        events.add(run.pk, "step.timed_out", step_id=row.pk)
        advancer.fail(row.name, error)
        return
    decision = Decision.APPROVED if node.on_timeout == "approve" else Decision.REJECTED
    output = decision_output(decision, by=None, selections=[], feedback="timed out")
    at = timezone.now()
    fields = {
        "decision": decision,
        "decided_via": DecisionVia.TIMEOUT,
        "decided_at": at,
        "output": output,
    }
    payload = {"decision": decision, **stamp(None, None, at), "reason": "timeout"}
    rejected = f"gate {row.name!r} timed out (rejected)"
    _record_decision(advancer, row, node, fields, payload, rejected=rejected)


def _record_decision(
    advancer: Advancer,
    row: StepRow,
    node: Gate,
    fields: dict[str, Any],
    payload: dict[str, Any],
    *,
    rejected: str,
) -> None:
    """Write a decision (``fields``, its ``gate.decided`` event saying ``payload``): a
    rejection of a gate that fails on one (``on_reject="fail"``) fails the step and the
    run, ``rejected`` saying why; any other decision completes the step."""
    run, events = advancer.run, advancer.events
    if fields["decision"] == Decision.REJECTED and node.on_reject == "fail":
        error = {"code": "gate_rejected", "message": rejected}
        advancer.move(row, StepStatus.FAILED, error=error, finished_at=timezone.now(), **fields)
        events.add(run.pk, "gate.decided", step_id=row.pk, **payload)
        events.add(run.pk, "step.failed", step_id=row.pk, code="gate_rejected")
        advancer.fail(row.name, error)
    else:
        advancer.move(row, StepStatus.COMPLETED, finished_at=timezone.now(), **fields)
        events.add(run.pk, "gate.decided", step_id=row.pk, **payload)
        events.add(run.pk, "step.completed", step_id=row.pk)
        advancer.settled(row.name)


def _write_claim(
    row: StepRow, held_by: int | None, claimer: AnyUser | None, at: datetime | None, doing: str
) -> None:
    """Compare-and-set the claim of a gate still ``waiting`` and held by ``held_by``
    (``None``: by nobody) to ``claimer`` at ``at``; :class:`StaleState` when it moved."""
    if not cas_update(
        Step,
        row.pk,
        version=row.version,
        where={"status": StepStatus.WAITING, "claimed_by": held_by},
        claimed_by=claimer,
        claimed_at=at,
        updated_at=db_now(),
    ):
        raise StaleState(f"gate {row.name!r} changed while being {doing}", step=row.name)
