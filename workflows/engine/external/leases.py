"""Using an external lease: heartbeat, complete or fail the attempt a token names.

Each use is one transition that locks the run (the lock order of every transition of a
run), reads the step and checks the token against it whole — the attempt and the owner
it names, still ``running``, the lease not expired on the database clock, the route
still external — before anything is written. Any check that fails raises
:class:`~workflows.LeaseLost` with one message that does not tell which, and writes
nothing. The outcome itself is then the in-process one
(:mod:`workflows.engine.outcomes`), fenced by (row, version, attempt, owner).

Two leniencies a worker over a network needs: completing twice with the same lease and
the same output answers as the first time did (a retried request whose answer was
lost), and failing twice likewise. A completion with another output is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import BooleanField, Case, Value, When
from django.db.models.functions import Now

from workflows.definitions import Task, registry
from workflows.definitions.limits import Route
from workflows.engine.cancellation import stop_reason
from workflows.engine.external.tokens import REFUSED, LeaseClaims, read_lease_token
from workflows.engine.lease import Lease
from workflows.engine.outcomes import Completion, complete_work, fail_attempt, heartbeat
from workflows.engine.sql.connection import engine_alias
from workflows.engine.sql.locks import lock_run
from workflows.engine.transaction import AfterCommit, transition
from workflows.engine.work_kinds import STEP
from workflows.errors import DefinitionMissing, LeaseLost, RunCancelled
from workflows.models import Run, Step
from workflows.status import StepStatus
from workflows.tracing import external_attempt_span

# What a use of a lease reads of its step: the fence, the route and the outcome so far.
_FIELDS = (
    "status",
    "attempt",
    "max_attempts",
    "lease_owner",
    "version",
    "name",
    "generation",
    "iteration",
    "round_attempts_before",
    "queue",
    "requires",
    "output",
    "error",
    "lease_expires_at",
)


def held_lease(claims: LeaseClaims) -> tuple[Lease, dict[str, Any]]:
    """The live lease ``claims`` names, and its step's row; inside a transition.

    Locks the run first. Raises :class:`LeaseLost` (:data:`REFUSED`) when the step is
    not running under exactly this attempt and owner, its lease expired, or it is not
    external work; the caller handles the outcomes it tolerates from the row first
    (:func:`_row_of`).
    """
    lease, row = _lease_of(claims)
    if row["status"] != StepStatus.RUNNING or not row["live"]:
        raise LeaseLost(REFUSED)
    return lease, row


def _row_of(claims: LeaseClaims) -> tuple[Run, dict[str, Any]]:
    """The run (locked) and the step row ``claims`` name, if they match its attempt and
    owner and the step is external work; :class:`LeaseLost` else."""
    try:
        run = lock_run(claims.run_id)
    except Run.DoesNotExist:
        raise LeaseLost(REFUSED) from None
    row = (
        Step.objects.using(engine_alias())
        .filter(pk=claims.step_id, run_id=claims.run_id)
        .annotate(
            live=Case(
                When(lease_expires_at__gt=Now(), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            )
        )
        .values(*_FIELDS, "live")
        .first()
    )
    if (
        row is None
        or row["attempt"] != claims.attempt
        or row["lease_owner"] != claims.owner
        or not Route.of_row(row["queue"], row["requires"]).external
    ):
        raise LeaseLost(REFUSED)
    return run, row


def _lease_of(claims: LeaseClaims) -> tuple[Lease, dict[str, Any]]:
    run, row = _row_of(claims)
    try:
        workflow = registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing:
        raise LeaseLost(REFUSED) from None
    node = workflow.nodes.get(row["name"])
    if not isinstance(node, Task) or not node.external:
        raise LeaseLost(REFUSED)
    lease = Lease(
        kind=STEP,
        unit_id=claims.step_id,
        run_id=claims.run_id,
        step_id=claims.step_id,
        step_name=row["name"],
        owner=claims.owner,
        workflow=workflow,
        run_input=run.input,
        traceparent=run.traceparent,
        handler_path="",
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        version=row["version"],
        generation=row["generation"],
        iteration=row["iteration"],
        attempts_before=row["round_attempts_before"],
    )
    return lease, row


@transition
def heartbeat_external_lease(
    token: object, report: Callable[[Lease], None] | None = None
) -> datetime:
    """Extend the lease ``token`` names by its step's timeout; return the new expiry.

    ``report``: what the worker reports with it (progress, log lines), written first,
    fenced by the same lease, in the same transaction. A run that asks its attempts to
    stop (cancelling, terminated, past its deadline) ends the attempt as ``cancelled``,
    as an in-process worker's would, and :class:`~workflows.RunCancelled` (a
    ``LeaseLost``) is raised once that is committed.
    """
    claims = read_lease_token(token)
    lease, _ = held_lease(claims)
    reason = stop_reason(STEP, lease.run_id)
    if reason is not None:
        stopped = RunCancelled(
            f"{lease.label} attempt {lease.attempt_in_round} asked to stop: {reason}",
            step=lease.step_name,
            attempt=lease.attempt_in_round,
            reason=reason,
        )
        fail_attempt(lease, stopped, quiet=True)
        _traced(lease, claims, "cancelled")
        raise AfterCommit(stopped)
    if report is not None:
        report(lease)
    heartbeat(lease)
    expires = Step.objects.using(engine_alias()).values_list("lease_expires_at", flat=True)
    renewed = expires.get(pk=lease.unit_id)
    assert renewed is not None, "a heartbeat sets the lease's expiry"
    return renewed


@transition
def report_external_lease(token: object, report: Callable[[Lease], None]) -> None:
    """Write what the worker reports (log lines, progress) for the lease ``token``
    names, fenced by it; the lease is not extended (a log line is not a heartbeat)."""
    lease, _ = held_lease(read_lease_token(token))
    report(lease)


@transition
def complete_external_lease(
    token: object,
    output: Any,
    variable_patches: list[dict[str, Any]] | None = None,
    tag_patches: list[dict[str, str | None]] | None = None,
) -> Completion:
    """Record ``output`` as the result of the attempt ``token`` names, and commit
    ``variable_patches`` of the run's variables and ``tag_patches`` of its tags with it
    (checked by the caller), fenced by the lease as the output is.

    The same output again for an attempt that completed is a :class:`Completion` with
    ``duplicate``; another output, or an attempt that ended otherwise, :class:`LeaseLost`.
    """
    claims = read_lease_token(token)
    lease, row = _lease_of(claims)
    if row["status"] == StepStatus.COMPLETED and row["output"] == output:
        return Completion(duplicate=True)
    if row["status"] != StepStatus.RUNNING or not row["live"]:
        raise LeaseLost(REFUSED)
    lease.variable_patches.extend(variable_patches or ())
    lease.tag_patches.extend(tag_patches or ())
    complete_work(lease, output)
    _traced(lease, claims, "completed")
    return Completion()


@transition
def fail_external_lease(token: object, error: BaseException) -> str:
    """Record the attempt ``token`` names as failed with ``error`` (its class decided by
    :func:`~workflows.engine.failures.classify`): retried per the task's policy, or the
    step fails. Returns the step's new status. Failing an attempt that already failed
    answers its status again."""
    claims = read_lease_token(token)
    lease, row = _lease_of(claims)
    if row["status"] in (StepStatus.RETRY_SCHEDULED, StepStatus.FAILED) and (
        (row["error"] or {}).get("message") == str(error)
    ):
        return str(row["status"])
    if row["status"] != StepStatus.RUNNING or not row["live"]:
        raise LeaseLost(REFUSED)
    status = fail_attempt(lease, error)
    _traced(lease, claims, "failed", error)
    return status


def _traced(
    lease: Lease, claims: LeaseClaims, outcome: str, error: BaseException | None = None
) -> None:
    """The ``workflow.step`` span of the external attempt that just ended, from its
    claim to the commit of its end (:func:`~workflows.tracing.external_attempt_span`);
    made once committed, so a transition retried on a locked SQLite makes one."""
    started_ns = claims.claimed_ns or time.time_ns()
    transaction.on_commit(
        lambda: external_attempt_span(
            lease.traceparent,
            lambda: {**lease.trace_attributes(), "flowsite.work.kind": "external"},
            started_ns=started_ns,
            outcome=outcome,
            error=error,
        ),
        using=engine_alias(),
    )
