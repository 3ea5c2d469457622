"""Gates: entering one (render the prompt, wait, arm the timeout) and deciding it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils import timezone

from workflows.definitions import Gate
from workflows.engine.advance import Advancer, enters
from workflows.engine.scope import run_of_step, run_scope
from workflows.engine.sql import StepRow, step_row
from workflows.engine.timers import cancel_timers, fires
from workflows.engine.transaction import transition
from workflows.errors import GateAlreadyDecided
from workflows.status import RUN_ALIVE, Decision, StepStatus, TimerKind


class _Outputs(Mapping[str, Any]):
    """``{steps[name]}`` in a prompt: earlier outputs, loaded on use."""

    def __init__(self, advancer: Advancer) -> None:
        self._steps = advancer.context.steps

    def __getitem__(self, name: str) -> Any:
        return self._steps[name].output

    def __iter__(self):  # type: ignore[no-untyped-def]
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
        reason="gate",
        changes={
            "prompt": prompt,
            "options": [option.as_dict() for option in node.options],
            "min_selections": node.min_selections,
            "max_selections": node.max_selections,
            "permission": node.permission,
            "assignees": {"users": node.assignee_users, "groups": node.assignee_groups},
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


@transition
def decide_gate(
    step_id: int,
    *,
    version: int,
    decision: str,
    user: Any = None,
    selections: list[str] | None = None,
    feedback: str = "",
    reason: str = "",
) -> None:
    """Record an approval or rejection on a waiting gate; of two racing decisions one wins.

    The loser's compare-and-set on (step, version, waiting) matches nothing and it gets
    :class:`GateAlreadyDecided`; nothing is written for it. A rejection fails the step
    and the run unless the gate routes on rejections (``on_reject="continue"``).
    """
    with run_scope(run_of_step(step_id)) as scope:
        run, row = scope.run, step_row(step_id)
        if (
            row.status != StepStatus.WAITING
            or row.version != version
            or run.status not in RUN_ALIVE
        ):
            raise GateAlreadyDecided(
                f"gate {row.name!r} is {row.status}, no longer waiting for a decision",
                step=row.name,
                status=row.status,
            )
        node = scope.workflow.nodes[row.name]
        assert isinstance(node, Gate)
        advancer, events = scope.advancer, scope.events
        username = user.get_username() if user is not None else None
        output = decision_output(
            decision, by=username, selections=selections or [], feedback=feedback
        )
        fields = {
            "decision": decision,
            "decided_by": user,
            "decided_at": timezone.now(),
            "feedback": feedback,
            "selections": selections or [],
            "output": output,
        }
        cancel_timers(row.pk, TimerKind.GATE_TIMEOUT)
        payload = {"decision": decision, "by": username, **({"reason": reason} if reason else {})}
        if decision == Decision.REJECTED and node.on_reject == "fail":
            error = {
                "code": "gate_rejected",
                "message": f"gate {row.name!r} was rejected"
                + (f" by {username}" if username else "")
                + (f": {feedback}" if feedback else ""),
            }
            advancer.move(row, StepStatus.FAILED, error=error, finished_at=timezone.now(), **fields)
            events.add(run.pk, "gate.decided", step_id=row.pk, **payload)
            events.add(run.pk, "step.failed", step_id=row.pk, code="gate_rejected")
            advancer.fail(row.name, error)
        else:
            advancer.move(row, StepStatus.COMPLETED, finished_at=timezone.now(), **fields)
            events.add(run.pk, "gate.decided", step_id=row.pk, **payload)
            events.add(run.pk, "step.completed", step_id=row.pk)
            advancer.settled(row.name)


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
    fields = {"decision": decision, "decided_at": timezone.now(), "output": output}
    events.add(run.pk, "gate.decided", step_id=row.pk, decision=decision, reason="timeout")
    if decision == Decision.REJECTED and node.on_reject == "fail":
        error = {"code": "gate_rejected", "message": f"gate {row.name!r} timed out (rejected)"}
        advancer.move(row, StepStatus.FAILED, error=error, finished_at=timezone.now(), **fields)
        events.add(run.pk, "step.failed", step_id=row.pk, code="gate_rejected")
        advancer.fail(row.name, error)
    else:
        advancer.move(row, StepStatus.COMPLETED, finished_at=timezone.now(), **fields)
        events.add(run.pk, "step.completed", step_id=row.pk)
        advancer.settled(row.name)
