"""What holds a run at a step that is not final, by the step's kind (a gate's decision,
a signal, a callback or the next poll, a fan-out's items), and at its child runs,
compensations and scheduled timers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from workflows.definitions import FanOut
from workflows.holds import HoldKind, await_details
from workflows.queries.explain.reading import Reading
from workflows.queries.explain.records import WaitingOn
from workflows.status import NodeKind, StepStatus, TimerKind

__all__ = ["UNTOLD_TIMERS", "child", "compensation", "step_hold", "timer"]


# Scheduled timers that are no entry of ``waiting_on``: told otherwise.
UNTOLD_TIMERS = frozenset({TimerKind.RELEASE, TimerKind.DEADLINE, TimerKind.REPEAT})


def _gate(reading: Reading, step: dict[str, Any]) -> WaitingOn | None:
    if step["status"] != StepStatus.WAITING:
        return None
    assignees = step["assignees"] or {}
    return WaitingOn(
        HoldKind.GATE,
        step["name"],
        {
            "step_id": step["id"],
            "prompt": step["prompt"],
            "users": assignees.get("users", []),
            "groups": assignees.get("groups", []),
            "permission": step["permission"] or None,
            "due_at": reading.timeouts.get((step["id"], TimerKind.GATE_TIMEOUT)),
            "on_timeout": reading.described(step["name"]).get("on_timeout"),
            "claimed_by": step["claimed_by__username"],
            "claimed_at": step["claimed_at"],
        },
    )


def _signal(reading: Reading, step: dict[str, Any]) -> WaitingOn | None:
    if step["status"] != StepStatus.WAITING:
        return None
    return WaitingOn(
        HoldKind.SIGNAL,
        step["name"],
        {
            "name": step["signal_name"],
            "due_at": reading.timeouts.get((step["id"], TimerKind.SIGNAL_TIMEOUT)),
        },
    )


def _callback(reading: Reading, step: dict[str, Any]) -> WaitingOn | None:
    """A waiting task waits for a callback (its handler returned
    ``ctx.await_callback()``), for a signal (it returned ``Await``), or, a poll between
    two iterations, for its next poll."""
    if step["status"] != StepStatus.WAITING:
        return None
    if step["awaiting"] is not None:
        return WaitingOn(
            HoldKind.AWAIT,
            step["name"],
            await_details(
                step["awaiting"], reading.timeouts.get((step["id"], TimerKind.AWAIT_TIMEOUT))
            ),
        )
    next_poll = reading.timeouts.get((step["id"], TimerKind.REPEAT))
    if next_poll is not None:
        return _poll(reading, step, next_poll)
    return WaitingOn(
        HoldKind.CALLBACK,
        step["name"],
        {
            "attempt": step["attempt"] - step["round_attempts_before"],
            "expires_at": reading.timeouts.get((step["id"], TimerKind.CALLBACK_TIMEOUT)),
        },
    )


def _poll(reading: Reading, step: dict[str, Any], due_at: datetime) -> WaitingOn:
    most = reading.described(step["name"]).get("max_iterations")
    bound = f" of at most {most}" if most is not None else ""
    return WaitingOn(
        HoldKind.POLL,
        step["name"],
        {
            "iteration": step["iteration"],
            "max_iterations": most,
            "due_at": due_at,
            "message": f"waiting for its next poll (iteration {step['iteration']}{bound})",
        },
    )


def _fanout(reading: Reading, step: dict[str, Any]) -> WaitingOn | None:
    """Done and failed come from the step's counters, which change in the transaction
    of each item; running and pending from the one grouped count of item statuses."""
    if step["items_total"] == 0:
        return None
    counted = Counter(
        {status: reading.item_counts.get((step["id"], status), 0) for status in StepStatus}
    )
    node = reading.workflow.nodes.get(step["name"]) if reading.workflow else None
    tolerance_left = (
        node.allowed_failures(step["items_total"]) - step["items_failed"]
        if isinstance(node, FanOut)
        else None
    )
    return WaitingOn(
        HoldKind.FANOUT,
        step["name"],
        {
            "total": step["items_total"],
            "done": step["items_completed"],
            "failed": step["items_failed"],
            "skipped": step["items_skipped"],
            "running": counted[StepStatus.RUNNING] + counted[StepStatus.WAITING],
            "pending": counted[StepStatus.PENDING]
            + counted[StepStatus.READY]
            + counted[StepStatus.RETRY_SCHEDULED],
            "tolerance_left": tolerance_left,
        },
    )


# What holds a run at a step that is not final, by the step's kind. A sleep holds it
# by its timer and a sub-workflow by its child run, listed as such.
_STEP_HOLDS: dict[str, Callable[[Reading, dict[str, Any]], WaitingOn | None]] = {
    NodeKind.GATE: _gate,
    NodeKind.SIGNAL: _signal,
    NodeKind.TASK: _callback,
    NodeKind.FANOUT: _fanout,
}


def step_hold(reading: Reading, step: dict[str, Any]) -> WaitingOn | None:
    """What holds the run at ``step`` by the step's kind, if anything does."""
    hold = _STEP_HOLDS.get(step["kind"])
    return hold(reading, step) if hold is not None else None


def child(reading: Reading, child: Mapping[str, Any]) -> WaitingOn:
    return WaitingOn(
        HoldKind.CHILD,
        reading.step_names.get(child["parent_step_id"]),
        {
            "run": str(child["id"]),
            "workflow": child["workflow_name"],
            "status": child["status"],
            "item": child["parent_item__key"],
        },
    )


def compensation(reading: Reading, record: dict[str, Any]) -> WaitingOn:
    return WaitingOn(
        HoldKind.COMPENSATION,
        reading.step_names.get(record["step_id"]),
        {
            "sequence": record["sequence"],
            "handler": record["handler"],
            "status": record["status"],
            "attempt": record["attempt"],
            "item": record["item_key"],
        },
    )


# What a scheduled timer holds the run for, by its kind; the other timers end another
# wait (a gate's, a signal's, a callback's) and are told as its ``timeout``.
_TIMER_HOLDS = {TimerKind.SLEEP: HoldKind.SLEEP, TimerKind.RETRY: HoldKind.RETRY}


def timer(reading: Reading, timer: dict[str, Any]) -> WaitingOn:
    """A sleep, a retry's backoff or a wait's timeout: ``fires`` says the timer's kind."""
    step_id = timer["step_id"] or timer["compensation__step_id"]
    return WaitingOn(
        _TIMER_HOLDS.get(timer["kind"], HoldKind.TIMEOUT),
        reading.step_names.get(step_id),
        {
            "fires": timer["kind"],
            "due_at": timer["due_at"],
            "overdue": timer["overdue"],
            "item": timer["item__key"],
            "compensation": timer["compensation__sequence"],
        },
    )
