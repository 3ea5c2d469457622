"""Awaits: a task's handler ends its attempt to wait for a signal it names at run time.

A handler returns ``workflows.Await("mapping", timeout=...)``: the attempt ends (its
lease released, its concurrency slot freed) without using one up, since the step's
``max_attempts`` grows by one in the same transition, so the retries left and the
backoff positions (:func:`~workflows.engine.lease.retry_delay`) stay as they were. The
step waits with ``Step.awaiting`` set, and its handler runs again as the next attempt
when one of the names arrives (``send_signal``, the API, a signal token) or the
await-timeout timer fires; ``Step.resumed`` says which (``ctx.resumed``).

Parking is fenced by the lease as :func:`~workflows.engine.nodes.callback.park_for_callback`
is, and holds the run's lock, as :func:`~workflows.engine.nodes.wait_for_signal.send_signal_once`
does: a signal that commits first is kept and consumed here, one that commits second
finds the step waiting and resumes it. Neither is lost.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from workflows.context import Await
from workflows.engine.advance import Advancer
from workflows.engine.lease import Lease
from workflows.engine.limits.admission import free_attempt_slot
from workflows.engine.scope import run_scope
from workflows.engine.signal_buffer import consume, oldest_kept
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow, step_row, step_rows
from workflows.engine.sql.updates import cas_update
from workflows.engine.tags import commit_tags
from workflows.engine.timers import cancel_timers, fires
from workflows.engine.transaction import transition
from workflows.engine.variables import commit_variables
from workflows.engine.wakeups.hub import timer_armed
from workflows.engine.work_kinds import STEP
from workflows.errors import LeaseLost, PermanentError, RunCancelled
from workflows.models import Signal, Step, Timer
from workflows.status import RUN_ALIVE, StepStatus, TimerKind


def checked_await(lease: Lease, request: Await) -> Await:
    """Return ``request`` if ``lease``'s handler may make it, else raise
    :class:`PermanentError` naming the rule: only a task step's handler awaits (a fan-out
    item's or a compensation's cannot: their step waits for them, not for a signal), and
    only for names its ``Task(awaits=[...])`` declares."""
    if lease.kind is not STEP:
        raise PermanentError(
            f"only a task step's handler can await a signal; {lease.label} cannot "
            "(fan-out items and compensations run to an end)"
        )
    declared = getattr(lease.node, "awaits", ())
    undeclared = [name for name in request.signals if name not in declared]
    if undeclared:
        raise PermanentError(
            f"step {lease.step_name!r} awaits signal {undeclared[0]!r}, which its Task does "
            f"not declare (awaits={list(declared)!r}): send_signal would refuse it"
        )
    return request


@transition
def park_for_await(lease: Lease, request: Await) -> None:
    """End the attempt and make the step wait for one of ``request.signals``.

    A signal of those names the run keeps (sent before the await) is consumed at once:
    the step goes straight back to ``ready`` with it as ``resumed``. A lost lease (an
    expired and reclaimed attempt, a revoke) raises :class:`LeaseLost` and writes
    nothing; the attempt that holds the step now decides. A run that stopped while the
    handler ran (cancelling, compensating, ended) raises :class:`RunCancelled`, also
    writing nothing: nothing would ever resume the await, so the runner records the
    attempt as stopped, as it does when a heartbeat finds the run stopping.
    """
    with run_scope(lease.run_id, workflow=lease.workflow) as scope:
        if scope.run.status not in RUN_ALIVE:
            raise RunCancelled(
                f"{lease.label} attempt {lease.attempt} awaits, but its run is {scope.run.status}"
            )
        advancer = scope.advancer  # settles the run's status at the end: waiting, as a rule
        row = step_row(lease.step_id)
        now = timezone.now()
        until = now + request.timeout if request.timeout is not None else None
        kept = oldest_kept(scope.run.pk, request.signals)
        if not cas_update(
            Step,
            lease.unit_id,
            version=lease.version,
            where={"attempt": lease.attempt, "lease_owner": lease.owner, "status": "running"},
            status=StepStatus.WAITING,
            max_attempts=row.max_attempts + 1,
            lease_owner="",
            lease_expires_at=None,
            started_at=db_now(),
            awaiting={
                "signals": list(request.signals),
                "until": until.isoformat() if until is not None else None,
                "since": now.isoformat(),
            },
            updated_at=db_now(),
        ):
            raise LeaseLost(f"{lease.label} attempt {lease.attempt} lost its lease before awaiting")
        free_attempt_slot(scope, lease)
        commit_variables(scope, lease)
        commit_tags(scope, lease)
        scope.events.add(
            scope.run.pk,
            "step.awaiting",
            step_id=row.pk,
            attempt=lease.attempt_in_round,
            signals=list(request.signals),
            until=until.isoformat() if until is not None else None,
        )
        (row,) = step_rows(scope.run.pk, [row.name])
        if kept is not None:
            _resume_with(advancer, row, kept)
        elif until is not None:
            Timer.objects.create(
                run_id=scope.run.pk, step_id=row.pk, kind=TimerKind.AWAIT_TIMEOUT, due_at=until
            )
            timer_armed(until)


def resume_on_signal(advancer: Advancer, signal: Signal) -> None:
    """Resume the oldest step of the run whose handler awaits ``signal``'s name with it;
    when none does, the signal is kept. Called under the run's lock by the transition
    that delivers the signal."""
    awaiting = (
        Step.objects.filter(
            run_id=advancer.run.pk, status=StepStatus.WAITING, awaiting__isnull=False
        )
        .order_by("id")
        .values_list("name", "awaiting")
    )
    name = next(
        (step for step, what in awaiting if what is not None and signal.name in what["signals"]),
        None,
    )
    if name is not None:
        (row,) = step_rows(advancer.run.pk, [name])
        _resume_with(advancer, row, signal)


def _resume_with(advancer: Advancer, row: StepRow, signal: Signal) -> None:
    consume(signal, row.pk)
    _resume(
        advancer,
        row,
        {"signal": signal.name, "payload": signal.payload},
        signal=signal.name,
        signal_id=signal.pk,
    )


@fires(TimerKind.AWAIT_TIMEOUT)
def await_timed_out(advancer: Advancer, row: StepRow) -> None:
    """No awaited signal arrived in time: the handler runs again and is told so."""
    _resume(advancer, row, {"timed_out": True}, timed_out=True)


def _resume(advancer: Advancer, row: StepRow, resumed: dict[str, Any], **event: Any) -> None:
    """``waiting → ready`` with ``resumed`` for the handler's next attempt, queued now when
    its run may start work (a paused run's resume dispatches it)."""
    advancer.move(row, StepStatus.READY, awaiting=None, resumed=resumed)
    cancel_timers(row.pk, TimerKind.AWAIT_TIMEOUT)
    advancer.events.add(advancer.run.pk, "step.resumed", step_id=row.pk, **event)
    advancer.events.add(advancer.run.pk, "step.ready", step_id=row.pk)
    if advancer.run.status in STEP.runs_while:
        advancer.dispatch(STEP, row.pk, row.name)


def resumed_of(step_id: int) -> dict[str, Any] | None:
    """The step's ``resumed``: what ``ctx.resumed`` reads, on first access."""
    return Step.objects.filter(pk=step_id).values_list("resumed", flat=True).first()
