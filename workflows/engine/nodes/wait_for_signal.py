"""Signals: kept until a ``WaitForSignal`` step (or a handler's ``Await``) consumes them;
idempotent by key."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import IntegrityError
from django.utils import timezone

from workflows.definitions import WaitForSignal
from workflows.engine.advance import Advancer, enters
from workflows.engine.created import Created
from workflows.engine.fingerprint import fingerprint
from workflows.engine.nodes.awaits import resume_on_signal
from workflows.engine.scope import run_scope
from workflows.engine.signal_buffer import consume, oldest_kept
from workflows.engine.sql.rows import StepRow, step_rows
from workflows.engine.timers import cancel_timers, fires
from workflows.engine.transaction import transition
from workflows.errors import IdempotencyConflict, InvalidTransition
from workflows.models import Signal, Step
from workflows.status import RUN_ALIVE, StepStatus, TimerKind


@enters(WaitForSignal)
def enter_wait(advancer: Advancer, row: StepRow, node: WaitForSignal) -> str:
    """Consume a signal that arrived early, or park the step until one arrives."""
    early = oldest_kept(advancer.run.pk, [node.signal])
    if early is not None:
        consume(early, row.pk)
        return advancer.complete(row, early.payload, signal=early.pk)
    due_at = timezone.now() + node.timeout if node.timeout is not None else None
    advancer.park(
        row,
        TimerKind.SIGNAL_TIMEOUT,
        due_at,
        reason=WaitForSignal.kind,
        signal=node.signal,
        changes={"signal_name": node.signal},
    )
    return StepStatus.WAITING


@fires(TimerKind.SIGNAL_TIMEOUT)
def time_out_wait(advancer: Advancer, row: StepRow) -> None:
    """No signal arrived in time: the step times out and the run fails."""
    node = advancer.workflow.nodes[row.name]
    assert isinstance(node, WaitForSignal)
    error = {
        "code": "signal_timeout",
        "message": f"step {row.name!r}: no signal {node.signal!r} arrived in time",
    }
    advancer.move(row, StepStatus.TIMED_OUT, error=error, finished_at=timezone.now())
    advancer.events.add(advancer.run.pk, "step.timed_out", step_id=row.pk, code="signal_timeout")
    advancer.fail(row.name, error)


def send_signal_once(
    run_id: UUID,
    name: str,
    payload: Any = None,
    *,
    idempotency_key: str | None = None,
    sent_by: str | None = None,
    via: str | None = None,
) -> Created[Signal]:
    """Deliver signal ``name`` to a run; a waiting step consumes it at once.

    The same ``idempotency_key`` with the same payload returns the first signal and has
    no further effect; with a different payload it raises :class:`IdempotencyConflict`
    and changes nothing. ``sent_by`` (a user's name) and ``via`` (how it came, e.g.
    ``"token"`` for a signal token) go into the run's history.

    ``created`` is true only for the call whose insert made the signal; a repeat, and
    the loser of a race on one key (its insert fails on the key's unique index, after
    waiting for the run's lock), get the first signal with ``created=False``.
    """
    payload_hash = fingerprint({"name": name, "payload": payload}, field="signal")
    if idempotency_key is not None:
        existing = _existing(run_id, idempotency_key, payload_hash)
        if existing is not None:
            return Created(existing, created=False)
    try:
        return _deliver(run_id, name, payload, payload_hash, idempotency_key, sent_by, via)
    except IntegrityError:
        existing = _existing(run_id, idempotency_key, payload_hash) if idempotency_key else None
        if existing is None:
            raise
        return Created(existing, created=False)


def _existing(run_id: UUID, key: str, payload_hash: str) -> Signal | None:
    signal = Signal.objects.filter(run_id=run_id, idempotency_key=key).first()
    if signal is not None and signal.payload_hash != payload_hash:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used for signal {signal.name!r} of run {run_id} "
            "with a different name or payload",
            run=str(run_id),
            idempotency_key=key,
        )
    return signal


@transition
def _deliver(
    run_id: UUID,
    name: str,
    payload: Any,
    payload_hash: str,
    idempotency_key: str | None,
    sent_by: str | None,
    via: str | None,
) -> Created[Signal]:
    with run_scope(run_id) as scope:
        run = scope.run
        if idempotency_key is not None:
            # Read again under the run's lock: a racing send with this key may have
            # delivered (and ended the run) since the read before the lock; its repeat
            # is answered with that signal, not refused for the run's new status.
            existing = _existing(run_id, idempotency_key, payload_hash)
            if existing is not None:
                return Created(existing, created=False)
        if run.status not in RUN_ALIVE:
            raise InvalidTransition(
                f"run {run_id} is {run.status}; only running, waiting or paused runs accept "
                "signals",
                run=str(run_id),
                status=run.status,
            )
        signal = Signal.objects.create(
            run_id=run_id,
            name=name,
            payload=payload,
            idempotency_key=idempotency_key,
            payload_hash=payload_hash,
        )
        details: dict[str, Any] = {"by": sent_by}
        if via is not None:
            details["via"] = via
        scope.events.add(run.pk, "signal.received", name=name, signal=signal.pk, **details)
        waiting = (
            Step.objects.filter(run_id=run_id, status=StepStatus.WAITING, signal_name=name)
            .order_by("id")
            .values_list("name", flat=True)
            .first()
        )
        if waiting is not None:
            (row,) = step_rows(run.pk, [waiting])
            consume(signal, row.pk)
            cancel_timers(row.pk, TimerKind.SIGNAL_TIMEOUT)
            scope.advancer.complete(row, payload, signal=signal.pk)
            scope.advancer.settled(row.name)
        else:
            resume_on_signal(scope.advancer, signal)
    return Created(signal, created=True)
