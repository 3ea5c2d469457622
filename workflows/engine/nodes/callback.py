"""Callbacks: a task parks itself behind a signed, expiring token until it is resolved.

A handler returns ``ctx.await_callback(timeout=...)`` after handing the token to an
external system; the step waits (its lease released) until ``complete_callback`` or
``fail_callback`` presents the token, or the timeout counts as a failed attempt. The
token names the run, step and attempt and is signed with Django's signing framework,
so a tampered token is refused, an expired one too, and a second use finds the
attempt already resolved.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.core import signing
from django.utils import timezone

from workflows.definitions import LeasedNode
from workflows.engine.advance import Advancer
from workflows.engine.failures import retried
from workflows.engine.lease import Lease, retry_delay
from workflows.engine.limits.admission import free_attempt_slot
from workflows.engine.nodes.compensation import CompletedUnit, record_compensation
from workflows.engine.outcomes import settle_failure
from workflows.engine.scope import run_of_step, run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.sql.updates import cas_update
from workflows.engine.tags import commit_tags
from workflows.engine.timers import cancel_timers, fires
from workflows.engine.transaction import transition
from workflows.engine.variables import commit_variables
from workflows.engine.work_kinds import STEP, FailedUnit
from workflows.errors import (
    CallbackAlreadyUsed,
    CallbackExpired,
    InvalidCallbackToken,
    LeaseLost,
)
from workflows.models import Timer
from workflows.status import RUN_ALIVE, FailureClass, StepStatus, TimerKind

SALT = "workflows.callback"


@dataclass(frozen=True)
class AwaitCallback:
    """Returned by a handler to park its step until the token is resolved."""

    token: str
    timeout: timedelta


def make_token(run_id: UUID, step_id: int, attempt: int, timeout: timedelta) -> str:
    """Sign (run, step, attempt, timeout): what a callback may resolve, and until when."""
    return signing.dumps(
        {"r": str(run_id), "s": step_id, "a": attempt, "t": timeout.total_seconds()},
        salt=SALT,
    )


def read_token(token: str) -> dict[str, Any]:
    """Verify a token's signature and age; raise a clear error for a bad or stale one."""
    try:
        claims = signing.loads(token, salt=SALT)
        return signing.loads(token, salt=SALT, max_age=claims["t"])
    except signing.SignatureExpired as exc:
        raise CallbackExpired(f"callback token expired: {exc}") from None
    except (signing.BadSignature, KeyError, TypeError) as exc:
        raise InvalidCallbackToken(f"callback token is invalid: {exc}") from None


@transition
def park_for_callback(lease: Lease, request: AwaitCallback) -> None:
    """Move the running step to ``waiting`` behind its token and arm the timeout.

    If the callback already resolved the attempt while the handler was still running,
    there is nothing to park; a lost lease raises :class:`LeaseLost`.
    """
    with run_scope(lease.run_id, needs_definition=False) as scope:
        row = step_row(lease.step_id)
        if row.attempt == lease.attempt and row.status != StepStatus.RUNNING:
            return  # resolved by an early callback
        if not cas_update(
            lease.kind.model,
            lease.unit_id,
            version=lease.version,
            where={"attempt": lease.attempt, "lease_owner": lease.owner, "status": "running"},
            status=StepStatus.WAITING,
            lease_expires_at=None,
            updated_at=db_now(),
        ):
            raise LeaseLost(f"{lease.label} attempt {lease.attempt} lost its lease before parking")
        free_attempt_slot(scope, lease)
        commit_variables(scope, lease)
        commit_tags(scope, lease)
        due_at = timezone.now() + request.timeout
        Timer.objects.create(
            run_id=scope.run.pk, step_id=row.pk, kind=TimerKind.CALLBACK_TIMEOUT, due_at=due_at
        )
        scope.events.add(
            scope.run.pk,
            "step.waiting",
            step_id=row.pk,
            reason="callback",
            until=due_at.isoformat(),
        )


def resolve_callback(token: str, *, output: Any = None, error: str | None = None) -> None:
    """Complete (or, with ``error``, fail) the attempt a token names."""
    claims = read_token(token)
    _resolve(claims["s"], claims["a"], output, error)


@transition
def _resolve(step_id: int, attempt: int, output: Any, error: str | None) -> None:
    with run_scope(run_of_step(step_id)) as scope:
        run, row = scope.run, step_row(step_id)
        if (
            row.attempt != attempt
            or row.status not in (StepStatus.WAITING, StepStatus.RUNNING)
            or run.status not in RUN_ALIVE
        ):
            raise CallbackAlreadyUsed(
                f"the callback of step {row.name!r} attempt {attempt} was already resolved "
                f"(the step is {row.status} at attempt {row.attempt})",
                step=row.name,
            )
        node = scope.workflow.nodes[row.name]
        assert isinstance(node, LeasedNode)
        cancel_timers(row.pk, TimerKind.CALLBACK_TIMEOUT)
        if error is not None:
            failure = {
                "code": "callback_failed",
                "message": error,
                "attempt": attempt,
                "failure_class": FailureClass.TRANSIENT.value,
            }
            _fail_attempt_in_place(scope.advancer, row, failure)
            return
        scope.advancer.move(
            row,
            StepStatus.COMPLETED,
            output=output,
            finished_at=db_now(),
            lease_owner="",
            lease_expires_at=None,
        )
        scope.events.add(
            run.pk,
            "step.completed",
            step_id=row.pk,
            attempt=attempt - row.attempts_before,
            via="callback",
        )
        unit = CompletedUnit(row.pk, row.generation, row.iteration)
        record_compensation(scope.advancer, node, output, unit)
        scope.advancer.settled(row.name)


@fires(TimerKind.CALLBACK_TIMEOUT)
def callback_timed_out(advancer: Advancer, row: StepRow) -> None:
    """The token's time ran out: the attempt failed (retried per the task's policy)."""
    failure = {
        "code": "callback_timeout",
        "message": f"no callback for step {row.name!r} attempt {row.attempt} in time",
        "attempt": row.attempt,
        "failure_class": FailureClass.TIMEOUT.value,
    }
    _fail_attempt_in_place(advancer, row, failure)


def _fail_attempt_in_place(advancer: Advancer, row: StepRow, failure: dict[str, Any]) -> None:
    """A parked attempt failed (class ``transient`` when the callback said so, ``timeout``
    when none came in time): retry per the task's policy and its ``retry_on``, or fail
    the step for good."""
    node = advancer.workflow.nodes[row.name]
    assert isinstance(node, LeasedNode)
    retry = node.effective_retry
    delay = (
        retry_delay(retry, row.attempt, row.max_attempts)
        if retried(retry, failure["failure_class"])
        else None
    )
    status = StepStatus.RETRY_SCHEDULED if delay is not None else StepStatus.FAILED
    advancer.move(
        row,
        status,
        error=failure,
        failure_class=failure["failure_class"],
        lease_owner="",
        lease_expires_at=None,
        **({} if delay is not None else {"finished_at": db_now()}),
    )
    unit = FailedUnit(
        STEP,
        row.pk,
        row.pk,
        row.name,
        "",
        failure,
        row.generation,
        row.iteration,
        row.attempts_before,
    )
    settle_failure(advancer, unit, attempt=row.attempt - row.attempts_before, delay=delay)
