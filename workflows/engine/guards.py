"""Which states each operator verb accepts, and the reason in words when it refuses.

One table for the verbs themselves (which raise :class:`InvalidTransition` with the
reason), for ``explain`` (``allowed_actions``), for bulk dry runs and for every surface
that shows an operator what they may do. A verb's guard is checked again under the run
lock by the verb's own transition: what a surface shows is advice, the verb decides.
"""

from __future__ import annotations

from dataclasses import dataclass

from workflows.errors import InvalidTransition
from workflows.status import (
    RUN_ACTIVE,
    RUN_ALIVE,
    RUN_FINAL,
    RUN_HELD,
    RUN_UNWINDING,
    RunStatus,
    StepStatus,
)

# Why a queued or blocked run refuses a verb, besides the statuses the verb needs.
_NOT_STARTED = {
    RunStatus.QUEUED: (
        "run is queued: it waits for a place under its workflow's max_concurrent_runs and "
        "nothing of it has started"
    ),
    RunStatus.BLOCKED: (
        "run is blocked: it is a flow member waiting for its upstream members and nothing "
        "of it has started"
    ),
}


@dataclass(frozen=True)
class RunVerb:
    """An operator verb on a whole run, and the run statuses it accepts."""

    name: str
    accepts: frozenset[str]
    summary: str

    def refusal(self, status: str) -> str | None:
        """``None`` when a run in ``status`` accepts this verb, else the reason."""
        if status in self.accepts:
            return None
        state = _NOT_STARTED.get(RunStatus(status), f"run is {status}")
        return f"{state}; {self.name} needs {_listed(self.accepts)}"

    def check(self, run_id: object, status: str) -> None:
        """Raise :class:`InvalidTransition` with the reason when ``status`` is refused."""
        reason = self.refusal(status)
        if reason is not None:
            raise InvalidTransition(f"run {run_id}: {reason}", status=status, verb=self.name)


@dataclass(frozen=True)
class StepVerb:
    """An operator verb on one step: the step statuses and run statuses it accepts."""

    name: str
    accepts: frozenset[str]
    run_accepts: frozenset[str]
    summary: str

    def refusal(self, step_status: str, run_status: str, *, noun: str = "step") -> str | None:
        """``None`` when a step (or the ``noun``: an item, a compensation) in
        ``step_status`` of a run in ``run_status`` accepts this verb, else the reason."""
        if step_status not in self.accepts:
            return f"{noun} is {step_status}; {self.name} needs {_listed(self.accepts)}"
        if run_status not in self.run_accepts:
            state = _NOT_STARTED.get(RunStatus(run_status), f"run is {run_status}")
            return f"{state}; {self.name} needs a run {_listed(self.run_accepts)}"
        return None

    def check(self, step_name: str, step_status: str, run_status: str) -> None:
        reason = self.refusal(step_status, run_status)
        if reason is not None:
            raise InvalidTransition(
                f"step {step_name!r}: {reason}", status=step_status, verb=self.name
            )


def _listed(statuses: frozenset[str]) -> str:
    return ", ".join(sorted(str(status) for status in statuses))


CANCEL = RunVerb(
    "cancel",
    RUN_ACTIVE | {RunStatus.PAUSED, RunStatus.QUEUED, RunStatus.BLOCKED},
    "stop the run and compensate what it completed",
)
TERMINATE = RunVerb(
    "terminate",
    RUN_ACTIVE | RUN_UNWINDING | {RunStatus.PAUSED, RunStatus.QUEUED, RunStatus.BLOCKED},
    "stop the run at once, without compensation; running attempts lose their lease",
)
PAUSE = RunVerb("pause", RUN_ACTIVE, "start nothing new until resumed; running work finishes")
RESUME = RunVerb("resume", frozenset({RunStatus.PAUSED}), "start work again after a pause")
# Replays take every ended run (a retry: every one that did not complete); what became
# of the run's completed work may still refuse one (workflows.engine.replay).
RETRY = RunVerb(
    "retry",
    RUN_FINAL - {RunStatus.COMPLETED},
    "finish what the run did not (fresh attempts), redo what was compensated, or run "
    "failed compensations again",
)
RERUN = RunVerb(
    "rerun",
    RUN_FINAL,
    "run a step and everything downstream of it again",
)
# Any run not over: a queued run moves in its queue, a started one's unstarted work
# is claimed sooner or later.
PRIORITY = RunVerb(
    "priority",
    RUN_ALIVE | RUN_UNWINDING | {RunStatus.QUEUED, RunStatus.BLOCKED},
    "change the run's priority and that of its work not yet started",
)
# Run metadata (workflows.engine.verbs.dismiss, .business_key). Only an ended run is
# dismissed: a live one still needs whoever watches it. A business key names work in
# flight, so only a run not over takes one; an ended run's key is its history's.
DISMISS = RunVerb(
    "dismiss", RUN_FINAL, "hide the ended run from the default lists and the attention views"
)
UNDISMISS = RunVerb("undismiss", RUN_FINAL, "show the dismissed run in the default lists again")
BUSINESS_KEY = RunVerb(
    "business_key",
    RUN_ALIVE | RUN_UNWINDING | {RunStatus.QUEUED, RunStatus.BLOCKED},
    "set the run's business key",
)
RUN_VERBS: dict[str, RunVerb] = {
    verb.name: verb
    for verb in (
        CANCEL,
        TERMINATE,
        PAUSE,
        RESUME,
        RETRY,
        RERUN,
        PRIORITY,
        DISMISS,
        UNDISMISS,
        BUSINESS_KEY,
    )
}

RETRY_STEP = StepVerb(
    "retry_step",
    frozenset({StepStatus.FAILED, StepStatus.TIMED_OUT}),
    frozenset({RunStatus.FAILED}),
    "run a failed step again with fresh attempts; its run resumes",
)
SKIP_STEP = StepVerb(
    "skip_step",
    frozenset(
        {
            StepStatus.PENDING,
            StepStatus.READY,
            StepStatus.WAITING,
            StepStatus.RETRY_SCHEDULED,
            StepStatus.FAILED,
            StepStatus.TIMED_OUT,
        }
    ),
    RUN_ACTIVE | {RunStatus.FAILED},
    "record the step as done with an operator's output, without running it",
)
# A running attempt (of a step, a fan-out item or a compensation) in any run that may
# still have one: an unwinding run's too, whose cancel or compensation waits for it.
REVOKE = StepVerb(
    "revoke",
    frozenset({StepStatus.RUNNING}),
    RUN_ACTIVE | RUN_HELD | RUN_UNWINDING,
    "take the lease from the running attempt now; the work runs again, without using up an attempt",
)
STEP_VERBS: dict[str, StepVerb] = {verb.name: verb for verb in (RETRY_STEP, SKIP_STEP, REVOKE)}
# Leased work that is stuck before it could end (never claimed, waiting for a retry that
# will not help, or wedged in a running attempt), ended as failed by an operator. Not
# among STEP_VERBS: no page offers it on one step; the bulk recovery of stuck units
# (workflows.services.bulk_units) and Python (workflows.services.fail_step) call it.
FAIL_STEP = StepVerb(
    "fail_step",
    frozenset({StepStatus.READY, StepStatus.RETRY_SCHEDULED, StepStatus.RUNNING}),
    RUN_ACTIVE | RUN_HELD | RUN_UNWINDING,
    "end the stuck work as failed now, as its last attempt failing would; a running "
    "attempt loses its lease",
)

assert RERUN.accepts <= RUN_FINAL
assert not PRIORITY.accepts & RUN_FINAL
