"""Errors raised by Flowsite.

Every error a caller can meet derives from :class:`WorkflowError` and carries a stable
``code`` (what the API returns and what operators grep for). A class's docstring is its
default message, so ``raise StaleState()`` still says something useful.

:class:`PermanentError` is different: handler code raises it to say "do not retry this
attempt"; it is not an error of the engine.
"""

from __future__ import annotations

from typing import Any


class WorkflowError(Exception):
    """A workflow operation failed."""

    code = "workflow_error"

    def __init__(self, message: str | None = None, **details: Any) -> None:
        self.message = message or (self.__doc__ or self.code).strip()
        self.details = details
        super().__init__(self.message)

    def as_dict(self) -> dict[str, Any]:
        """Return the error as the JSON-serialisable ``{"code", "message", "details"}``."""
        return {"code": self.code, "message": self.message, "details": self.details}


class DefinitionError(WorkflowError):
    """The workflow definition is invalid."""

    code = "invalid_definition"


class DefinitionMissing(WorkflowError):
    """The run's workflow (name, version) is not registered in this process."""

    code = "definition_missing"


class InvalidInput(WorkflowError):
    """The input given to the workflow is not valid."""

    code = "invalid_input"


class StaleState(WorkflowError):
    """Someone else changed this row first; nothing was written."""

    code = "stale_state"


class DatabaseBusy(WorkflowError):
    """The database stayed locked by other writers through every retry; nothing was
    written. Try again shortly."""

    code = "database_busy"


class RunBusy(StaleState):
    """Another transition holds this run right now; a scanner skips it and comes back."""

    code = "run_busy"


class StaleVersion(StaleState):
    """The gate (or row) changed since the version the caller saw; read it again."""

    code = "stale_version"


class LeaseLost(StaleState):
    """This worker's lease on the work expired or was taken over; its result was rejected."""

    code = "lease_lost"


class LeaseExpired(LeaseLost):
    """This worker's lease on the work expired before it was renewed: stop the work. No one
    may have taken it yet, but the lease scanner will (as ``lease_expired``); nothing of
    this attempt is written meanwhile."""

    code = "lease_expired"


class RunCancelled(LeaseLost):
    """This attempt's run was cancelled, terminated or is past its deadline: stop the work
    (the attempt is recorded as failed with class ``cancelled`` and is not retried)."""

    code = "run_cancelled"


class IdempotencyConflict(WorkflowError):
    """The idempotency key was used before with a different payload."""

    code = "idempotency_conflict"


class UnknownSignal(WorkflowError):
    """The run's workflow has no WaitForSignal step for this signal name."""

    code = "unknown_signal"


class RunNotFound(WorkflowError):
    """No run has this id."""

    code = "run_not_found"


class WaitTimeout(WorkflowError):
    """The run did not reach a final status within the time waited for it
    (``workflows.wait_for``); ``details`` name the run and its status when the wait ended."""

    code = "wait_timeout"


class PermanentError(Exception):
    """Raised by a handler to fail its step at once, without further retries."""


class TransientError(Exception):
    """Raised by a handler to say its failure is passing: class ``transient``, retried
    as its task's ``Retry`` says, even when ``non_retryable`` lists one of its types."""


class WorkHeld(StaleState):
    """The work may not start yet: a limit holds it (its ``held_on`` says which)."""

    code = "work_held"


class GateAlreadyDecided(StaleState):
    """The gate is no longer waiting for a decision (decided, timed out or cancelled)."""

    code = "gate_already_decided"


class InvalidDecision(WorkflowError):
    """The decision does not fit the gate's options."""

    code = "invalid_decision"


class InvalidTransition(WorkflowError):
    """The run or step is not in a state this operation accepts."""

    code = "invalid_transition"


class DependencyUnmet(InvalidTransition):
    """A flow member cancelled because a dependency failed cannot run again while its
    join is not satisfied: retry the failed upstream member (``details["failed_upstream"]``
    names them), and the member follows by itself."""

    code = "dependency_unmet"


class BusinessKeyInUse(InvalidTransition):
    """Another live run of this workflow holds the business key, and the workflow's
    business keys are unique (``Workflow.unique_business_key``)."""

    code = "business_key_in_use"


class InvalidCallbackToken(WorkflowError):
    """The callback token is malformed or was tampered with."""

    code = "invalid_callback_token"


class CallbackExpired(WorkflowError):
    """The callback token has expired."""

    code = "callback_expired"


class CallbackAlreadyUsed(StaleState):
    """The callback was already completed, failed or timed out."""

    code = "callback_already_used"


class StepNotFound(WorkflowError):
    """No step has this id."""

    code = "step_not_found"


class ChildRunFailed(WorkflowError):
    """The child run did not complete."""

    code = "child_failed"

    @classmethod
    def of(cls, child: Any) -> ChildRunFailed:
        """The failure of a parent's step or item whose child ``child`` (a Run) ended badly."""
        cause = (child.error or {}).get("message", "")
        return cls(
            f"child run {child.pk} ({child.workflow_name}) ended {child.status}"
            + (f": {cause}" if cause else ""),
            child=str(child.pk),
            status=child.status,
        )


class GateClaimed(WorkflowError):
    """Another user holds this gate's claim; only they or an override holder may decide it."""

    code = "gate_claimed"


class BudgetExhausted(WorkflowError):
    """A usage budget covering this run is used up; the step was not started."""

    code = "budget_exhausted"


class FlowNotFound(WorkflowError):
    """No flow has this id or key."""

    code = "flow_not_found"


class ScheduleNotFound(WorkflowError):
    """No schedule has this key."""

    code = "schedule_not_found"


class InvalidFlowChange(WorkflowError):
    """The flow's graph refuses this change: an unknown member, a self edge, an edge that
    would close a cycle, a downstream already started, or a closed flow."""

    code = "invalid_flow_change"


class StaleRevision(StaleState):
    """The flow's graph changed since the revision this change was staged against; read
    it again (``details["revision"]`` is the current one) and decide anew."""

    code = "stale_revision"


class SignalTokenRefused(WorkflowError):
    """The signal token was refused; nothing was written. Each refusal has its own
    subclass and code: invalid, expired, foreign, wrong signal."""

    code = "signal_token_refused"


class SignalTokenInvalid(SignalTokenRefused):
    """The signal token was not made by this site: malformed, truncated, tampered with,
    or signed with a key that is neither ``SECRET_KEY`` nor one of its fallbacks."""

    code = "signal_token_invalid"


class SignalTokenExpired(SignalTokenRefused):
    """The signal token is genuine but past its expiry (or older than
    ``WORKFLOWS["SIGNAL_TOKEN_MAX_AGE"]``); ask for a new one."""

    code = "signal_token_expired"


class SignalTokenForeign(SignalTokenRefused):
    """The token was not made for sending a signal here: a token of another kind (a
    callback token, an approval link), or one naming a run this site does not have."""

    code = "signal_token_foreign"


class SignalTokenWrongSignal(SignalTokenRefused):
    """The signal token allows another signal than the one named with it."""

    code = "signal_token_wrong_signal"


class ConsumerNotFound(WorkflowError):
    """No event consumer has this name. Reading creates none: a consumer is created by
    ``POST /api/events/consumers/`` (``workflows.create_consumer``), by
    ``workflows.consume`` in code, or by its first acknowledgement, each by a caller who
    may manage consumers."""

    code = "consumer_not_found"


class TooManyWaits(WorkflowError):
    """This user already holds as many long polls (``?wait=``) as
    ``WORKFLOWS["LONG_POLLS_PER_USER"]`` allows; retry when one of them has answered."""

    code = "too_many_waits"
