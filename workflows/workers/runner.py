"""Running handler code for leased work, fenced by its lease: outside any transaction, or
inside the one that records its outcome for a transactional node; a batch of fan-out
items one handler after another, with all their outcomes recorded in one transaction."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any, Protocol

from django.db import DataError
from django.utils.module_loading import import_string

from workflows.conf import workflow_settings
from workflows.context import Await, Context
from workflows.engine import Lease, claim, fail_attempt
from workflows.engine.cancellation import cancel_requested
from workflows.engine.claims import claimable
from workflows.engine.failures import AttemptTimedOut
from workflows.engine.lease import Held, LeaseBatch
from workflows.engine.limits.budgets import record_usage
from workflows.engine.nodes.awaits import checked_await, park_for_await, resumed_of
from workflows.engine.nodes.callback import AwaitCallback, make_token, park_for_callback
from workflows.engine.outcomes import (
    heartbeat_batch,
    record_batch,
    record_completion,
    record_lost_lease,
)
from workflows.engine.recovery import return_unstarted
from workflows.engine.tags import TagsRefused
from workflows.engine.transaction import transition
from workflows.engine.variables import VariablesRefused
from workflows.engine.work_kinds import STEP, WorkKind
from workflows.errors import DefinitionMissing, LeaseLost, PermanentError, RunCancelled, StaleState
from workflows.tracing import UNTRACED, AttemptSpan, attempt_span
from workflows.validation import check_json
from workflows.workers.telemetry import DeferredTelemetry
from workflows.workers.watchdog import overran, timed_out, watchdog

logger = logging.getLogger("workflows.runner")


class StopFlag(Protocol):
    """What :func:`stop_when` needs of an event: ``multiprocessing`` or ``threading``'s."""

    def is_set(self) -> bool: ...


# The stop event of the django-q2 cluster this process works for, when it has one: set in
# the cluster's sentinel before it forks its workers (``workflows.workers.cluster``).
_cluster_stopping: StopFlag | None = None


def stop_when(event: StopFlag | None) -> None:
    """Make ``event`` tell this process and the workers it forks that their cluster is
    stopping: a worker then finishes the attempt in hand and neither chains nor pulls
    more, so a stop waits for one step, not for a chain budget. ``None``: no cluster."""
    global _cluster_stopping
    _cluster_stopping = event


def _stopping() -> bool:
    return _cluster_stopping is not None and _cluster_stopping.is_set()


def worker_id() -> str:
    """Name this worker thread in lease columns: host, process and thread."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def execute(
    kind: WorkKind,
    unit_id: int,
    *,
    owner: str | None = None,
    chain: bool = True,
    pull: bool = False,
) -> int:
    """Claim and run ready work; with ``chain``, keep going with the work it releases.

    With ``pull`` (a queue worker), a chain that ends (its run finished, or waits) goes
    on with the best ready unit of the same kind and route, as the claim of a nudge
    whose unit was taken would (:func:`~workflows.engine.claims.claim`), until nothing
    is ready or a unit cannot be claimed: a busy worker does not wait for the queue to
    hand it work that is already in the database. The nudges of pulled units then find
    them taken, after one read (:func:`~workflows.engine.claims.claimable`).

    Chaining and pulling stop once this call has been busy for ``CHAIN_BUDGET``, or
    once the worker's cluster is stopping (:func:`stop_when`): the next unit is then
    left ``ready`` for the queue, so one queue task never runs long enough for the
    queue to think its worker died, and a stopping worker ends with the attempt in hand.
    Returns how many attempts this call ran. Work that another worker claimed first, or
    that is no longer ready, is not an error: it returns 0.
    """
    owner = owner or worker_id()
    deadline = time.monotonic() + workflow_settings.CHAIN_BUDGET.total_seconds()

    def may_go_on() -> bool:
        return chain and time.monotonic() < deadline and not _stopping()

    held = _take(kind, unit_id, owner, look_first=pull)
    attempts = 0
    while held is not None:
        attempts += len(held.leases) if isinstance(held, LeaseBatch) else 1
        held = run_attempt(held, chain=may_go_on())
        if held is None and pull and may_go_on():
            held = _take(kind, unit_id, owner, look_first=True)
    return attempts


def _take(kind: WorkKind, unit_id: int, owner: str, *, look_first: bool) -> Held | None:
    """Claim ``unit_id`` (or the unit its claim takes instead) for ``owner``; ``None``
    when there is nothing to claim. ``look_first``: read before claiming, so that
    finding nothing writes nothing."""
    if look_first and not claimable(kind, unit_id):
        return None
    try:
        return claim(kind, unit_id, owner)
    except (StaleState, DefinitionMissing) as exc:
        logger.debug("%s %s not claimed: %s", kind.name, unit_id, exc)
        return None


def execute_step(step_id: int, *, owner: str | None = None, chain: bool = True) -> int:
    """:func:`execute` for a task step."""
    return execute(STEP, step_id, owner=owner, chain=chain)


def log_fields(lease: Lease) -> dict[str, Any]:
    """The ``extra`` of a log record about ``lease``'s work, so that a structured
    formatter can filter one run's, step's or attempt's records without parsing text."""
    return {"run_id": str(lease.run_id), "step": lease.step_name, "attempt": lease.attempt}


def _context(
    lease: Lease, batch: LeaseBatch | None = None, telemetry: DeferredTelemetry | None = None
) -> Context:
    """The handler's context; ``telemetry``: the attempt's buffer for ``ctx.progress``,
    ``log`` and ``summary`` (its heartbeat flushes it first, then extends the lease, or
    the batch's leases), one of its own when not given; made on its first call."""

    def await_callback(timeout: timedelta) -> AwaitCallback:
        if lease.kind is not STEP:
            raise PermanentError("only a task's handler can wait for a callback")
        return AwaitCallback(
            make_token(lease.run_id, lease.step_id, lease.attempt, timeout), timeout
        )

    if telemetry is None:
        telemetry = DeferredTelemetry(lease, _batch_beat(lease, batch))
    context = Context(
        run_id=lease.run_id,
        input=lease.run_input,
        step_names=tuple(lease.workflow.nodes),
        step_name=lease.step_name,
        attempt=lease.attempt,
        iteration=lease.iteration,
        idempotency_key=lease.idempotency_key,
        item=lease.item,
        compensated_output=lease.compensated_output,
        heartbeat=telemetry.heartbeat,
        await_callback=await_callback,
        report_usage=partial(
            record_usage, lease.run_id, lease.step_id, lease.attempt, lease.workflow
        ),
        cancel_requested=partial(cancel_requested, lease.kind, lease.run_id),
        progress=telemetry.progress,
        log=telemetry.log,
        summary=telemetry.summary,
        read_resumed=partial(resumed_of, lease.step_id) if lease.kind is STEP else None,
        variable_patches=lease.variable_patches,
        tag_patches=lease.tag_patches,
    )
    telemetry.serve(context)
    return context


def _batch_beat(lease: Lease, batch: LeaseBatch | None) -> Callable[[], None] | None:
    """What extends ``lease`` in a batch (every item of it); ``None``: its own heartbeat."""
    return None if batch is None else partial(heartbeat_batch, batch, caller=lease)


def run_attempt(held: Held, *, chain: bool = True) -> Held | None:
    """Run the handler of claimed work and record its outcome.

    Returns the lease of the next unit (or batch) when ``chain`` claimed one in the same
    transaction as this one's completion. A lost lease is logged, never raised: the
    work belongs to another worker now. A transactional node's handler runs inside the
    transaction that records its outcome (:func:`_run_in_transaction`); a batch of
    items is run by :func:`_run_batch`.
    """
    if isinstance(held, LeaseBatch):
        return _run_batch(held, chain=chain)
    with attempt_span(held.traceparent, held.trace_attributes) as span:
        return _run_one(held, span, chain=chain)


def _run_one(lease: Lease, span: AttemptSpan, *, chain: bool) -> Held | None:
    """:func:`run_attempt` for one unit, telling ``span`` how its attempt ended."""
    if lease.refusal is not None:  # a limit let it start only to fail (engine.admission)
        _record_failure(lease, lease.refusal, span)
        return None
    if lease.node.transactional:
        return _run_in_transaction(lease, span, chain=chain)
    try:
        result = _call_handler(lease)
    except RunCancelled as cancelled:  # a LeaseLost, but the lease may still be held
        _record_stopped(lease, cancelled, span)
        return None
    except AttemptTimedOut as late:
        _record_stopped(lease, late, span, lost_action="completion")
        return None
    except LeaseLost as lost:
        _lost(lease, lost, span)
        return None
    except Exception as exc:
        _record_failure(lease, exc, span)
        return None
    return _record_output(lease, result, span, chain=chain)


def _record_output(
    lease: Lease, result: Any, span: AttemptSpan = UNTRACED, *, chain: bool
) -> Held | None:
    """Record a handler's result; a lost lease is logged, an output refused fails the unit,
    an await in a run that stopped meanwhile is recorded as stopped."""
    try:
        following = _record_result(lease, result, chain=chain)
    except RunCancelled as cancelled:
        _record_stopped(lease, cancelled, span)
    except LeaseLost as lost:
        _lost(lease, lost, span)
    except DataError as exc:
        _record_failure(lease, _refused_output(exc), span)
    except (VariablesRefused, TagsRefused) as refused:
        _record_failure(lease, refused, span)
    else:
        span.ended(_ended_by(result))
        return following
    return None


def _ended_by(result: Any) -> str:
    """The outcome of an attempt whose handler returned ``result``, once recorded."""
    if isinstance(result, Await):
        return "awaiting"
    if isinstance(result, AwaitCallback):
        return "waiting_for_callback"
    return "completed"


def _lost(lease: Lease, lost: LeaseLost, span: AttemptSpan = UNTRACED) -> None:
    """Log an attempt whose lease was lost (its work is another worker's now)."""
    logger.warning("%s", lost, extra=log_fields(lease))
    span.ended("lease_lost", lost)


def _run_batch(batch: LeaseBatch, *, chain: bool) -> Held | None:
    """Run the handlers of a batch of items one after another, then record every outcome
    in one transaction (:func:`~workflows.engine.outcomes.record_batch`).

    Each handler gets its own context: its item, attempt and idempotency key, the same
    as unbatched. The leases are renewed together (``ctx.heartbeat()`` of any item, or
    this loop once half the timeout has passed), and an item whose lease was found lost
    is neither run nor recorded; one whose lease only expired before it started is
    given back, its attempt not counted (:func:`_give_back_unstarted`). Should the
    database refuse the batch's transaction (an output it cannot store), or an item's
    variables patches be refused at the commit (past their size limit), each item is
    recorded on its own, so only that item fails.
    A crash before the recording commits leaves every item of the batch ``running``:
    the lease scanner reclaims them and they run again with the same idempotency keys.
    """
    completed: list[tuple[Lease, Any]] = []
    failed: list[tuple[Lease, BaseException]] = []
    cancelled: RunCancelled | None = None
    leases = list(batch.leases)
    held = len(leases)
    for index, lease in enumerate(leases):
        if batch.renewal_due():
            heartbeat_batch(batch)
        if len(batch.leases) != held:  # a renewal (this loop's or a handler's) dropped some
            held = len(batch.leases)
            _give_back_unstarted(batch, leases[index:])
        if not batch.holds(lease):
            continue  # lost to a reclaim or a cancel: another worker's now
        # A refused start fails; once the run asks to stop, the rest are not started.
        unstarted = lease.refusal or cancelled
        if unstarted is not None:
            failed.append((lease, unstarted))
            continue
        with attempt_span(lease.traceparent, lease.trace_attributes) as span:
            try:
                completed.append((lease, _call_handler(lease, batch)))
            except RunCancelled as stop:  # class cancelled, as are the items after it
                cancelled = stop
                failed.append((lease, stop))
                span.ended("cancelled")
            except LeaseLost as lost:
                _lost(lease, lost, span)
            except Exception as exc:
                failed.append((lease, exc))
                span.ended("failed", exc)
            else:
                span.ended("completed")
    if not completed and not failed:
        return None
    try:
        following, lost_leases = record_batch(batch, completed, failed, claim_next=chain)
    except (DataError, VariablesRefused, TagsRefused):
        for lease, output in completed:
            _record_output(lease, output, chain=False)
        for lease, error in failed:
            _record_failure(lease, error)
        return None
    for lease, lease_lost in lost_leases:
        logger.warning("%s", lease_lost, extra=log_fields(lease))
    return following


def _give_back_unstarted(batch: LeaseBatch, unstarted: list[Lease]) -> None:
    """Give back the items of ``unstarted`` (not run yet) that ``batch`` no longer holds.

    Behind an item that ran past the whole lease, the renewal finds the others' leases
    expired: they were never run, so their attempt is not counted
    (:func:`~workflows.engine.recovery.return_unstarted`); those a reclaim or a cancel
    took meanwhile do not match its fence and stay as they are.
    """
    still = {id(lease) for lease in batch.leases}
    dropped = [lease for lease in unstarted if id(lease) not in still]
    if dropped:
        return_unstarted(dropped)


def _call_handler(lease: Lease, batch: LeaseBatch | None = None) -> Any:
    """Run the handler: its output checked for storage, or its request to wait for a
    callback or a signal (:class:`Await`, checked against its step's rules).

    The process's watchdog times it (:mod:`workflows.workers.watchdog`); a handler run
    inside a transaction, which the watchdog does not watch, is judged when it returns:
    past its deadline, it raises :class:`AttemptTimedOut` instead of returning.
    """
    handler = import_string(lease.handler_path)
    telemetry = DeferredTelemetry(lease, _batch_beat(lease, batch))
    context = _context(lease, batch, telemetry)
    dog = watchdog()
    watched = dog.watch(lease)
    started = time.monotonic()
    try:
        result = handler(context)
    finally:
        telemetry.close()  # before the outcome is recorded, success or failure
        if watched:
            dog.unwatch(lease)
    if not watched and overran(lease, started):
        raise timed_out(lease)
    if isinstance(result, Await):
        return checked_await(lease, result)
    return result if isinstance(result, AwaitCallback) else checked_output(result)


def _record_result(lease: Lease, result: Any, *, chain: bool) -> Held | None:
    """Park the step behind its callback or its await, or record the output; raises
    ``LeaseLost``."""
    if isinstance(result, AwaitCallback):
        park_for_callback(lease, result)
        return None
    if isinstance(result, Await):
        park_for_await(lease, result)
        return None
    completion = record_completion(lease, result, claim_next=chain)
    if completion.duplicate:
        logger.info(
            "%s attempt %s had completed already with this output: nothing written",
            lease.label,
            lease.attempt,
            extra=log_fields(lease),
        )
    return completion.following


def _refused_output(exc: DataError) -> PermanentError:
    """The database refused an output that :func:`checked_output` passed.

    Left alone, the step would stay running until its lease expired and the handler,
    side effects and all, would run again on every attempt: it fails once, for good.
    """
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    refused = PermanentError(f"the database cannot store the handler's output: {reason}")
    refused.__cause__ = exc
    return refused


class _RolledBack(Exception):
    """Undoes a transactional attempt, carrying what to record once it is undone."""

    def __init__(self, error: Exception, action: str) -> None:
        super().__init__(str(error))
        self.error = error
        self.action = action


def _run_in_transaction(lease: Lease, span: AttemptSpan, *, chain: bool) -> Held | None:
    """Run a transactional handler and record its outcome in one database transaction.

    The handler's own writes commit only together with the completion (or the parking
    behind a callback). When the handler raises, its output cannot be stored, or the
    completion is fenced out because another worker reclaimed the work, everything rolls
    back, the handler's writes included, and the failure or the lost lease is recorded
    afterwards in a transaction of its own. A crash before the commit leaves neither.
    """
    version_at_start = lease.version
    try:
        following, result = _attempt_in_transaction(lease, chain)
    except _RolledBack as undone:
        # Writes of the rolled-back transaction (a heartbeat, the completion) moved the
        # lease's version in memory only.
        lease.version = version_at_start
        rolled_back = undone
    else:
        span.ended(_ended_by(result))
        return following
    if isinstance(rolled_back.error, RunCancelled | AttemptTimedOut):
        _record_stopped(lease, rolled_back.error, span, lost_action=rolled_back.action)
    elif isinstance(rolled_back.error, LeaseLost):
        _lost(lease, rolled_back.error, span)
        record_lost_lease(lease, rolled_back.action)
    else:
        _record_failure(lease, rolled_back.error, span)
    return None


@transition
def _attempt_in_transaction(lease: Lease, chain: bool) -> tuple[Held | None, Any]:
    """The transactional attempt: the unit it chained to, and the handler's result."""
    try:
        result = _call_handler(lease)
    except AttemptTimedOut as late:  # it returned past its deadline: its result is refused
        raise _RolledBack(late, "completion") from late
    except Exception as exc:  # a LeaseLost here comes from the handler's heartbeat
        raise _RolledBack(exc, "heartbeat") from exc
    action = "parking" if isinstance(result, AwaitCallback | Await) else "completion"
    try:
        return _record_result(lease, result, chain=chain), result
    except LeaseLost as lost:
        raise _RolledBack(lost, action) from lost
    except DataError as exc:
        raise _RolledBack(_refused_output(exc), action) from exc
    except (VariablesRefused, TagsRefused) as refused:
        raise _RolledBack(refused, action) from refused


def _record_failure(lease: Lease, exc: BaseException, span: AttemptSpan = UNTRACED) -> None:
    span.ended("failed", exc)
    try:
        fail_attempt(lease, exc)
    except LeaseLost as lost:
        logger.warning("%s", lost, extra=log_fields(lease))


def _record_stopped(
    lease: Lease,
    exc: Exception,
    span: AttemptSpan = UNTRACED,
    *,
    lost_action: str | None = None,
) -> None:
    """Record an attempt stopped by its run (:class:`RunCancelled`, class ``cancelled``) or
    by its deadline (:class:`AttemptTimedOut`, class ``timeout``) as failed, if it still
    holds its lease; never retried when cancelled.

    Quietly fenced: a lease lost meanwhile is only logged here, since the heartbeat that
    found it lost recorded ``lease.lost`` already, unless that record was rolled back
    with a transactional attempt or the loss is first seen here (``lost_action``: the
    action to record it for).
    """
    if isinstance(exc, RunCancelled):  # the run's choice, not the attempt's error
        span.ended("cancelled")
    else:
        span.ended("timeout", exc)
    try:
        fail_attempt(lease, exc, quiet=True)
    except LeaseLost as lost:
        logger.warning("%s", lost, extra=log_fields(lease))
        if lost_action is not None:
            record_lost_lease(lease, lost_action)


def checked_output(output: Any) -> Any:
    """Return ``output`` if every supported database stores it unchanged, else fail for good.

    The checks are :func:`workflows.validation.check_json`'s (JSON-serialisable, no NaN,
    unchanged by a round trip, no NUL character), raised as :class:`PermanentError`:
    retrying would return the same output.
    """
    return check_json(output, field="handler output", error=PermanentError)
