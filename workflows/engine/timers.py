"""Firing a durable timer: ``scheduled → fired`` and its effect, in one transaction."""

from __future__ import annotations

from django.utils import timezone

from workflows.definitions import registry
from workflows.engine.advance import Advancer
from workflows.engine.db import transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.runs import fail_run
from workflows.engine.sql import cas_update, db_now, lock_run
from workflows.errors import DefinitionMissing, StaleState
from workflows.models import Step, Timer
from workflows.status import RUN_ACTIVE, StepStatus, TimerKind, TimerStatus

# What each kind of timer wakes: the step status it expects and the one it sets.
_WAKES = {
    TimerKind.SLEEP: (StepStatus.WAITING, StepStatus.COMPLETED),
    TimerKind.RETRY: (StepStatus.RETRY_SCHEDULED, StepStatus.READY),
}


@transition
def fire_timer(timer_id: int) -> bool:
    """Fire one due timer; return ``False`` if it was already fired or cancelled.

    Two scanners firing the same timer race on the timer's compare-and-set: exactly one
    fires it and applies its effect, the other sees ``False``.
    """
    timer = Timer.objects.filter(pk=timer_id, status=TimerStatus.SCHEDULED).first()
    if timer is None:
        return False
    run = lock_run(timer.run_id)
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
    if run.status in RUN_ACTIVE and timer.step_id is not None:
        try:
            workflow = registry.get(run.workflow_name, run.workflow_version)
        except DefinitionMissing as missing:
            fail_run(run, missing.as_dict(), events)
        else:
            _wake_step(timer, Advancer(run, workflow, events))
    events.flush()
    return True


def _wake_step(timer: Timer, advancer: Advancer) -> None:
    expected, target = _WAKES[TimerKind(timer.kind)]
    step = Step.objects.only("id", "name", "version", "status").get(pk=timer.step_id)
    if step.status != expected:
        return  # the step moved on (an operator skipped or retried it): nothing to wake
    changes = {"finished_at": db_now(), "output": {"woke_at": timezone.now().isoformat()}}
    if not cas_update(
        Step,
        step.pk,
        version=step.version,
        where={"status": expected},
        status=target,
        updated_at=db_now(),
        **(changes if target == StepStatus.COMPLETED else {}),
    ):
        raise StaleState(f"step {step.name!r} changed while its {timer.kind} timer fired")
    events, run = advancer.events, advancer.run
    if target == StepStatus.COMPLETED:
        events.add(run.pk, "step.completed", step_id=step.pk)
        advancer.settled(step.name)
    else:
        events.add(run.pk, "step.ready", step_id=step.pk)
        advancer.ready_step_ids.append(step.pk)
        advancer.mark_in_hand()
    advancer.finish()
    enqueue(advancer.ready_step_ids)
