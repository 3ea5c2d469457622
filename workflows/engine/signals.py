"""Signals: kept until a ``WaitForSignal`` step consumes them; idempotent by key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import IntegrityError
from django.utils import timezone

from workflows.definitions import WaitForSignal, registry
from workflows.engine.db import transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.fingerprint import fingerprint
from workflows.engine.sql import StepRow, lock_run, step_rows
from workflows.errors import IdempotencyConflict, InvalidTransition
from workflows.models import Signal, Step
from workflows.status import RUN_ACTIVE, StepStatus, TimerKind

if TYPE_CHECKING:
    from workflows.engine.advance import Advancer


def enter_wait(advancer: Advancer, row: StepRow, node: WaitForSignal) -> str:
    """Consume a signal that arrived early, or park the step until one arrives."""
    early = (
        Signal.objects.filter(run_id=advancer.run.pk, name=node.signal, consumed_by__isnull=True)
        .order_by("id")
        .first()
    )
    if early is not None:
        _consume(early, row.pk)
        return advancer.complete(row, early.payload, signal=early.pk)
    due_at = timezone.now() + node.timeout if node.timeout is not None else None
    advancer.park(
        row,
        TimerKind.SIGNAL_TIMEOUT,
        due_at,
        reason="signal",
        signal=node.signal,
        changes={"signal_name": node.signal},
    )
    return StepStatus.WAITING


def _consume(signal: Signal, step_id: int) -> None:
    Signal.objects.filter(pk=signal.pk, consumed_by__isnull=True).update(
        consumed_by_id=step_id, consumed_at=timezone.now()
    )


def send_signal(
    run_id: UUID, name: str, payload: Any = None, *, idempotency_key: str | None = None
) -> Signal:
    """Deliver signal ``name`` to a run; a waiting step consumes it at once.

    The same ``idempotency_key`` with the same payload returns the first signal and has
    no further effect; with a different payload it raises :class:`IdempotencyConflict`
    and changes nothing.
    """
    payload_hash = fingerprint({"name": name, "payload": payload})
    if idempotency_key is not None:
        existing = _existing(run_id, idempotency_key, payload_hash)
        if existing is not None:
            return existing
    try:
        return _deliver(run_id, name, payload, payload_hash, idempotency_key)
    except IntegrityError:
        existing = _existing(run_id, idempotency_key, payload_hash) if idempotency_key else None
        if existing is None:
            raise
        return existing


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
    run_id: UUID, name: str, payload: Any, payload_hash: str, idempotency_key: str | None
) -> Signal:
    from workflows.engine.advance import Advancer

    run = lock_run(run_id)
    if run.status not in RUN_ACTIVE:
        raise InvalidTransition(
            f"run {run_id} is {run.status}; only running or waiting runs accept signals",
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
    events = EventLog()
    events.add(run.pk, "signal.received", name=name, signal=signal.pk)
    waiting = (
        Step.objects.filter(run_id=run_id, status=StepStatus.WAITING, signal_name=name)
        .order_by("id")
        .values_list("name", flat=True)
        .first()
    )
    if waiting is not None:
        workflow = registry.get(run.workflow_name, run.workflow_version)
        (row,) = step_rows(run.pk, [waiting])
        advancer = Advancer(run, workflow, events)
        _consume(signal, row.pk)
        signal.consumed_by_id = row.pk
        signal.consumed_at = timezone.now()
        _cancel_timeout(row.pk)
        advancer.complete(row, payload, signal=signal.pk)
        advancer.settled(row.name)
        advancer.finish()
        enqueue(advancer.ready_work)
    events.flush()
    return signal


def _cancel_timeout(step_id: int) -> None:
    from workflows.models import Timer
    from workflows.status import TimerStatus

    Timer.objects.filter(
        step_id=step_id, kind=TimerKind.SIGNAL_TIMEOUT, status=TimerStatus.SCHEDULED
    ).update(status=TimerStatus.CANCELLED)
