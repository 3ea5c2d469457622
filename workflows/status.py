"""Statuses of runs, steps and timers, and which of them are final; the kinds of node."""

from __future__ import annotations

from typing import NamedTuple

from django.db import models


class RunStatus(models.TextChoices):
    # Waiting for a place under its workflow's ``max_concurrent_runs``: nothing started.
    QUEUED = "queued"
    # A flow member waiting for its upstream members under its join: nothing started.
    BLOCKED = "blocked"
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    PAUSED = "paused"
    TERMINATED = "terminated"


class StepStatus(models.TextChoices):
    PENDING = "pending"
    READY = "ready"
    RUNNING = "running"
    WAITING = "waiting"
    RETRY_SCHEDULED = "retry_scheduled"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


class NodeKind(models.TextChoices):
    """What kind of node a step is: the ``kind`` of each node class in ``definitions/``,
    stored in ``Step.kind``. The labels are the values, as the admin has always shown them."""

    TASK = "task", "task"
    SLEEP = "sleep", "sleep"
    GATE = "gate", "gate"
    FANOUT = "fanout", "fanout"
    SIGNAL = "signal", "signal"
    SUBWORKFLOW = "subworkflow", "subworkflow"
    LOOP = "loop", "loop"


class TimerStatus(models.TextChoices):
    SCHEDULED = "scheduled"
    FIRED = "fired"
    CANCELLED = "cancelled"


class TimerKind(models.TextChoices):
    SLEEP = "sleep"
    RETRY = "retry"
    GATE_TIMEOUT = "gate_timeout"
    SIGNAL_TIMEOUT = "signal_timeout"
    CALLBACK_TIMEOUT = "callback_timeout"
    # Ready work delayed by a rate limit: dispatched again when a start is allowed.
    RELEASE = "release"
    DEADLINE = "deadline"
    # A polling task's sleep between iterations (``Task(repeat_until=, every=)``).
    REPEAT = "repeat"
    # A handler's ``Await``: the step resumes with ``{"timed_out": True}`` when it passes.
    AWAIT_TIMEOUT = "await_timeout"


class FailureClass(models.TextChoices):
    """Why an attempt of leased work failed: recorded on every failed attempt (its row's
    ``failure_class`` and ``error``, and the events that record it) and matched by
    ``Retry(retry_on=...)``."""

    TRANSIENT = "transient", "transient (an exception)"
    PERMANENT = "permanent", "permanent (not retryable)"
    TIMEOUT = "timeout", "timeout (ran past its timeout)"
    LEASE_EXPIRED = "lease_expired", "lease expired (the worker vanished or stalled)"
    REVOKED = "revoked", "revoked by an operator"
    CANCELLED = "cancelled", "cancelled (its run stopped)"
    BUDGET = "budget", "refused by a limit or budget"


class FrameStream(models.TextChoices):
    """Where a log frame of a running attempt came from (``ctx.log(text, stream=...)``)."""

    STDOUT = "stdout"
    STDERR = "stderr"
    EVENT = "event"


class CompensationStatus(models.TextChoices):
    PENDING = "pending"
    READY = "ready"
    RUNNING = "running"
    RETRY_SCHEDULED = "retry_scheduled"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"


class RunTrigger(models.TextChoices):
    """Which surface started a run (``Run.trigger``): set by that surface, never by the
    run itself, so that an operator reading a run knows where it came from."""

    # A direct Python call (``workflows.start_run``): the default.
    CODE = "code", "Python code"
    API = "api", "API"
    ADMIN = "admin", "console"
    COMMAND = "command", "command"
    SCHEDULE = "schedule", "schedule"
    # A flow's member, started by the flow when its join is satisfied (or at once).
    FLOW = "flow", "flow"
    # A child run, started by its parent's step.
    CHILD = "child", "parent run"


class Decision(models.TextChoices):
    APPROVED = "approved"
    REJECTED = "rejected"


class DecisionVia(models.TextChoices):
    """How a gate's decision was made: what the run page and the API show beside it.

    Only ``decision`` and ``skip`` pass the gate's own rule (the decider may decide the
    gate); ``timeout`` is the gate's ``on_timeout``; ``override`` is a skip by a holder
    of ``workflows.override_gate_rule`` whom the rule does not admit, never shown as an
    ordinary decision.
    """

    DECISION = "decision", "decided"
    TIMEOUT = "timeout", "decided by its timeout"
    SKIP = "skip", "skipped by a decider"
    OVERRIDE = "override", "skipped, overriding the gate's rule"


RUN_ACTIVE = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING})
# Runs rolling back: no new forward work starts, compensations run.
RUN_UNWINDING = frozenset({RunStatus.COMPENSATING, RunStatus.CANCELLING})
RUN_FINAL = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.COMPENSATED,
        RunStatus.COMPENSATION_FAILED,
        RunStatus.CANCELLED,
        RunStatus.TERMINATED,
    }
)
# The statuses of the runs the "failed" attention class holds (failed runs, and runs
# terminated while failing): a partial index keeps those not dismissed in creation order.
RUN_ATTENTION_FAILED = frozenset({RunStatus.FAILED, RunStatus.TERMINATED})
# Runs an operator paused: nothing new starts, work in flight is recorded, timers wait.
RUN_HELD = frozenset({RunStatus.PAUSED})
# Runs that are not over: their children, signals and decisions are still theirs.
RUN_ALIVE = RUN_ACTIVE | RUN_HELD
STEP_FINAL = frozenset(
    {
        StepStatus.COMPLETED,
        StepStatus.FAILED,
        StepStatus.SKIPPED,
        StepStatus.CANCELLED,
        StepStatus.TIMED_OUT,
    }
)
# Steps in these states are work in hand: while any exists the run is "running".
STEP_IN_HAND = frozenset({StepStatus.READY, StepStatus.RUNNING})


class FlowStatus(models.TextChoices):
    # Members and edges may be added.
    OPEN = "open"
    # No more members or edges; the flow ends when every member has ended.
    SEALED = "sealed"
    COMPLETED = "completed"
    FAILED = "failed"
    # Closed by cancel_flow (whatever its policy did to the members).
    CANCELLED = "cancelled"


FLOW_FINAL = frozenset({FlowStatus.COMPLETED, FlowStatus.FAILED, FlowStatus.CANCELLED})
# A closed flow takes no new member or edge.
FLOW_CLOSED = FLOW_FINAL | {FlowStatus.SEALED}


class JoinKind(models.TextChoices):
    """When a blocked flow member starts: every upstream completed, one of them, or k."""

    ALL = "all"
    ANY = "any"
    AT_LEAST = "at_least"


class DeliveryStatus(models.TextChoices):
    """A webhook delivery: waiting its turn, in a sender's hands, or done one way or another."""

    PENDING = "pending"
    SENDING = "sending"
    RETRY_SCHEDULED = "retry_scheduled"
    DELIVERED = "delivered"
    FAILED = "failed"
    SKIPPED = "skipped"


# Deliveries still to send: the head of an endpoint's queue is the oldest of these.
DELIVERY_OPEN = frozenset(
    {DeliveryStatus.PENDING, DeliveryStatus.SENDING, DeliveryStatus.RETRY_SCHEDULED}
)
# Deliveries waiting for a sender (due once ``next_attempt_at`` has passed).
DELIVERY_WAITING = frozenset({DeliveryStatus.PENDING, DeliveryStatus.RETRY_SCHEDULED})
# Deliveries that are over: the retention purge may delete them.
DELIVERY_ENDED = frozenset(
    {DeliveryStatus.DELIVERED, DeliveryStatus.FAILED, DeliveryStatus.SKIPPED}
)


class RoundAttempts(NamedTuple):
    """A step's attempts as every surface shows them: numbered within its round."""

    attempt: int
    max_attempts: int

    def __str__(self) -> str:
        return f"{self.attempt} of {self.max_attempts}"


def attempt_in_round(attempt: int, max_attempts: int, attempts_before: int) -> RoundAttempts:
    """The attempt ``attempt`` and the budget ``max_attempts`` of a step (as its row
    counts them, on across the step's life) numbered within the round that started
    after ``attempts_before`` attempts: a rerun, a retry or a loop's next iteration
    starts a new round, whose first attempt is 1. The one numbering the run page, the
    API, ``workflows_show`` and the events use."""
    return RoundAttempts(max(attempt - attempts_before, 0), max(max_attempts - attempts_before, 0))
