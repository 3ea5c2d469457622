"""Firing a durable timer: ``scheduled → fired`` and its effect, in one transaction."""

from __future__ import annotations

from django.utils import timezone

from workflows.definitions import Gate, registry
from workflows.engine import gates
from workflows.engine.advance import Advancer
from workflows.engine.db import transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.runs import fail_run
from workflows.engine.sql import StepRow, cas_update, db_now, lock_run, step_row
from workflows.errors import DefinitionMissing, StaleState
from workflows.models import CompensationRecord, FanOutItem, Timer
from workflows.status import RUN_ACTIVE, RUN_UNWINDING, StepStatus, TimerKind, TimerStatus


@transition
def fire_timer(timer_id: int, *, wait: bool = True) -> bool:
    """Fire one due timer; return ``False`` if it was already fired or cancelled.

    Two scanners firing the same timer race on the timer's compare-and-set: exactly one
    fires it and applies its effect, the other sees ``False``. With ``wait=False`` a run
    held by another transition raises :class:`~workflows.errors.RunBusy` instead of
    waiting (see :func:`~workflows.engine.sql.lock_run`).
    """
    timer = Timer.objects.filter(pk=timer_id, status=TimerStatus.SCHEDULED).first()
    if timer is None:
        return False
    run = lock_run(timer.run_id, wait=wait)
    if not cas_update(
        Timer,
        timer_id,
        version=timer.version,
        where={"status": TimerStatus.SCHEDULED},
        status=TimerStatus.FIRED,
        fired_at=db_now(),
    ):
        return False
    events = EventLog()
    events.add(run.pk, "timer.fired", step_id=timer.step_id, kind=timer.kind, timer=timer.pk)
    if run.status in RUN_ACTIVE or run.status in RUN_UNWINDING:
        try:
            workflow = registry.get(run.workflow_name, run.workflow_version)
        except DefinitionMissing as missing:
            fail_run(run, missing.as_dict(), events)
        else:
            advancer = Advancer(run, workflow, events)
            _apply(timer, advancer)
            advancer.finish()
            enqueue(advancer.ready_work)
    events.flush()
    return True


def _apply(timer: Timer, advancer: Advancer) -> None:
    if timer.kind == TimerKind.RETRY:
        _release_retry(timer, advancer)
        return
    if advancer.run.status not in RUN_ACTIVE or timer.step_id is None:
        return
    row = step_row(timer.step_id)
    if row.status != StepStatus.WAITING:
        return  # the step moved on (decided, signalled, skipped by an operator)
    node = advancer.workflow.nodes[row.name]
    if timer.kind == TimerKind.SLEEP:
        advancer.complete(row, {"woke_at": timezone.now().isoformat()})
        advancer.settled(row.name)
    elif timer.kind == TimerKind.GATE_TIMEOUT:
        assert isinstance(node, Gate)
        gates.time_out_gate(advancer, row, node)
    elif timer.kind == TimerKind.SIGNAL_TIMEOUT:
        _time_out(advancer, row, f"no signal {node.signal!r} arrived in time", "signal_timeout")  # type: ignore[attr-defined]
    elif timer.kind == TimerKind.CALLBACK_TIMEOUT:
        from workflows.engine.callbacks import callback_timed_out

        callback_timed_out(advancer, row)


def _time_out(advancer: Advancer, row: StepRow, message: str, code: str) -> None:
    error = {"code": code, "message": f"step {row.name!r}: {message}"}
    advancer.move(row, StepStatus.TIMED_OUT, error=error, finished_at=db_now())
    advancer.events.add(advancer.run.pk, "step.timed_out", step_id=row.pk, code=code)
    advancer.fail(row.name, error)


_RETRY_TARGETS = {"item": FanOutItem, "compensation": CompensationRecord}


def _release_retry(timer: Timer, advancer: Advancer) -> None:
    """Move the retried unit ``retry_scheduled → ready`` and queue it."""
    if timer.compensation_id is not None:
        kind, unit_id, may_run = "compensation", timer.compensation_id, RUN_UNWINDING
    elif timer.item_id is not None:
        kind, unit_id, may_run = "item", timer.item_id, RUN_ACTIVE
    else:
        kind, unit_id, may_run = "step", timer.step_id, RUN_ACTIVE
    if advancer.run.status not in may_run:
        return
    model = _RETRY_TARGETS.get(kind)
    if model is None:
        row = step_row(unit_id)
        if row.status != StepStatus.RETRY_SCHEDULED:
            return
        advancer.move(row, StepStatus.READY)
    else:
        unit = model.objects.only("id", "version", "status").get(pk=unit_id)
        if unit.status != StepStatus.RETRY_SCHEDULED:
            return
        if not cas_update(
            model,
            unit_id,
            version=unit.version,
            where={"status": StepStatus.RETRY_SCHEDULED},
            status=StepStatus.READY,
            updated_at=db_now(),
        ):
            raise StaleState(f"{kind} {unit_id} changed while its retry timer fired")
    advancer.events.add(advancer.run.pk, f"{kind}.ready", step_id=timer.step_id)
    advancer.dispatch(kind, unit_id)
