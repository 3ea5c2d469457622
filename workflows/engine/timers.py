"""Durable timers: firing one is ``scheduled → fired`` plus its effect, in one transaction.

A timer either releases a retry (any kind of leased work, looked up in the work-kind
table), acts on a waiting step, or acts on its whole run. What it does to a waiting step
is registered by the node module that armed it, with :func:`fires` (a sleep wakes, a
gate or signal times out, a callback's attempt fails); what a run-level timer does, with
:func:`fires_on_run` (a deadline fails the run), so this module imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from workflows.definitions.limits import Route
from workflows.engine.scope import RunScope, run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow, step_row
from workflows.engine.sql.updates import cas_update, cas_update_many
from workflows.engine.transaction import transition
from workflows.engine.work_kinds import kind_of_timer
from workflows.errors import StaleState
from workflows.models import Timer
from workflows.status import RUN_ACTIVE, RUN_HELD, StepStatus, TimerKind, TimerStatus

if TYPE_CHECKING:
    from workflows.engine.advance import Advancer

# What a timer does to the waiting step it was armed for: (advancer, the step's row).
TimerEffect = Callable[["Advancer", StepRow], None]
TIMER_EFFECTS: dict[str, TimerEffect] = {}
# What a run-level timer does to its run: (the run's scope, the timer). Unlike a step's
# timer, it fires on a paused run too: a run's deadline does not wait for a resume.
RunTimerEffect = Callable[[RunScope, Timer], None]
RUN_TIMER_EFFECTS: dict[str, RunTimerEffect] = {}


def fires(kind: str) -> Callable[[TimerEffect], TimerEffect]:
    """Register what a timer of ``kind`` does to the waiting step it was armed for."""

    def register(effect: TimerEffect) -> TimerEffect:
        TIMER_EFFECTS[kind] = effect
        return effect

    return register


def fires_on_run(kind: str) -> Callable[[RunTimerEffect], RunTimerEffect]:
    """Register what a run-level timer of ``kind`` does to its run (paused or not)."""

    def register(effect: RunTimerEffect) -> RunTimerEffect:
        RUN_TIMER_EFFECTS[kind] = effect
        return effect

    return register


def cancel_timers(step_id: int, kind: str | None = None) -> None:
    """Cancel a step's scheduled timers (of one kind, or all): the step moved on."""
    where = {"step_id": step_id, "status": TimerStatus.SCHEDULED}
    if kind is not None:
        where["kind"] = kind
    cas_update_many(Timer, where=where, status=TimerStatus.CANCELLED)


@transition
def fire_timer(timer_id: int, *, wait: bool = True) -> bool:
    """Fire one due timer; return ``False`` if it was already fired or cancelled, or its
    run is paused (the timer stays scheduled and fires after the resume; a run-level
    timer, :func:`fires_on_run`, fires on a paused run too).

    Two scanners firing the same timer race on the timer's compare-and-set: exactly one
    fires it and applies its effect, the other sees ``False``. With ``wait=False`` a run
    held by another transition raises :class:`~workflows.errors.RunBusy` instead of
    waiting (see :func:`~workflows.engine.sql.locks.lock_run`).
    """
    timer = Timer.objects.filter(pk=timer_id, status=TimerStatus.SCHEDULED).first()
    if timer is None:
        return False
    on_run = RUN_TIMER_EFFECTS.get(timer.kind)
    with run_scope(timer.run_id, wait=wait) as scope:
        if scope.run.status in RUN_HELD and on_run is None:
            return False  # a paused run's timers wait, scheduled, for its resume
        if not cas_update(
            Timer,
            timer_id,
            version=timer.version,
            where={"status": TimerStatus.SCHEDULED},
            status=TimerStatus.FIRED,
            fired_at=db_now(),
        ):
            return False
        scope.events.add(
            scope.run.pk, "timer.fired", step_id=timer.step_id, kind=timer.kind, timer=timer.pk
        )
        if timer.kind == TimerKind.RETRY:
            _release_retry(timer, scope.advancer)
        elif timer.kind == TimerKind.RELEASE:
            _release_delayed(timer, scope)
        elif on_run is not None:
            on_run(scope, timer)
        elif scope.run.status in RUN_ACTIVE and timer.step_id is not None:
            row = step_row(timer.step_id)
            if row.status == StepStatus.WAITING:  # else it moved on (decided, signalled...)
                TIMER_EFFECTS[timer.kind](scope.advancer, row)
    return True


def _release_delayed(timer: Timer, scope: RunScope) -> None:
    """A rate limit allows a start again: clear the unit's hold and queue it.

    The claim that takes it checks the limit once more; the unit is held again (with a
    new timer) if other workers used the allowance first.
    """
    kind = kind_of_timer(timer)
    unit_id = getattr(timer, f"{kind.timer_field}_id")
    unit = kind.model.objects.only("id", "version", "status", "held_on", "queue", "requires")
    found = unit.filter(pk=unit_id, status=StepStatus.READY).first()
    if found is None or scope.run.status not in kind.runs_while:
        return
    if found.held_on and not cas_update(
        kind.model,
        unit_id,
        version=found.version,
        where={"status": StepStatus.READY, "held_on": found.held_on},
        held_on="",
    ):
        return
    scope.dispatch(kind, unit_id, Route.of_row(found.queue, found.requires))


def _release_retry(timer: Timer, advancer: Advancer) -> None:
    """Move the retried unit ``retry_scheduled → ready`` and queue it."""
    kind = kind_of_timer(timer)
    if advancer.run.status not in kind.runs_while:
        return
    unit_id = getattr(timer, f"{kind.timer_field}_id")
    unit = kind.model.objects.only("id", "version", "status", "queue", "requires").get(pk=unit_id)
    if unit.status != StepStatus.RETRY_SCHEDULED:
        return
    if not cas_update(
        kind.model,
        unit_id,
        version=unit.version,
        where={"status": StepStatus.RETRY_SCHEDULED},
        status=StepStatus.READY,
        updated_at=db_now(),
    ):
        raise StaleState(f"{kind.name} {unit_id} changed while its retry timer fired")
    advancer.events.add(advancer.run.pk, f"{kind.name}.ready", step_id=timer.step_id)
    advancer.mark_in_hand()
    advancer.scope.dispatch(kind, unit_id, Route.of_row(unit.queue, unit.requires))
