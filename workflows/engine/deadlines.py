"""Run deadlines: at its deadline a run that has not ended fails with ``deadline_exceeded``.

A deadline (``start_run(deadline=...)``, ``Workflow.deadline``) is ``Run.deadline`` plus
a durable timer of kind ``deadline``, both written by the transaction that creates the
run (:func:`workflows.engine.start.create_run`), whether the run starts, waits queued
or blocked. When the timer fires (the compare-and-set ``scheduled → fired`` of
:func:`workflows.engine.timers.fire_timer`, on the database clock), :func:`deadline_passed`
fails the run in that same transaction, the way a step failing for good does
(:func:`workflows.engine.runs.fail_run`) with one difference: work in flight does not
get to finish. The deadline is a promise that the run is over by then, so:

- forward work stops: unstarted steps are cancelled, unstarted items skipped, the run's
  timers cancelled (waiting gates, signals, sleeps and callbacks with them);
- running attempts lose their lease now, as a terminate takes them: the step (or item)
  is recorded cancelled with failure class ``cancelled``, and the worker's late result
  or heartbeat matches nothing with its fenced write (``lease.lost``);
- compensation then runs as for any failure (``compensating → compensated`` or
  ``compensation_failed``; ``failed`` when there is nothing to undo), and child runs
  are cancelled, with their own compensation, by the sweeper's orphaned-children
  scanner, as a failing parent's are; the parent waits for them before it compensates.

A paused run past its deadline fails too (the timer fires on paused runs), and so does
a queued or blocked one: nothing of it started, so it simply ends ``failed``. A run
already final, or unwinding (cancelling, compensating), is left alone: its deadline
timer was cancelled when it started to unwind, or ended; should one fire all the same
it changes nothing but its own row and a ``timer.fired`` event. The timer is cancelled
in the transaction that ends the run (:func:`cancel_deadline`, a run-end hook), so a run
that completed leaves no timer behind to fire.

A handler that heartbeats may learn of the deadline before the timer fires:
``ctx.heartbeat()`` raises ``RunCancelled`` once the deadline has come by the database
clock (:mod:`workflows.engine.cancellation`). Its attempt then fails with class
``cancelled``, and that failure fails the run by its deadline all the same
(:func:`workflows.engine.runs.fail_run`): whichever comes first, the timer or the
handler, the run ends with ``deadline_exceeded``. The failing itself lives in
:func:`workflows.engine.runs.fail_at_deadline`; this module arms, fires and disarms.

Compensations run past the deadline: undoing what was done is not forward work, and
stopping it half way would leave the outside world in a state nobody chose.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from workflows.definitions.deadline import deadline_problems
from workflows.engine.events import EventLog
from workflows.engine.runs import fail_at_deadline, when_run_ends
from workflows.engine.scope import RunScope
from workflows.engine.sql.clock import database_now
from workflows.engine.sql.updates import cas_update_many
from workflows.engine.timers import fires_on_run
from workflows.errors import InvalidInput
from workflows.models import Run, Timer
from workflows.status import TimerKind, TimerStatus


def deadline_of(deadline: timedelta | datetime | None) -> datetime | None:
    """The moment a deadline falls on: a duration from now, or a moment that must still
    lie ahead, both on the database clock (read once, only when there is a deadline).

    Raises :class:`InvalidInput` for a value that is no deadline
    (:func:`~workflows.definitions.deadline.deadline_problems`) and for a moment that is
    not in the future: a run started late already would fail at once, which is never
    what the caller meant.
    """
    if deadline is None:
        return None
    problems = deadline_problems(deadline)
    if problems:
        raise InvalidInput(problems[0], field="deadline")
    now = database_now()
    if isinstance(deadline, timedelta):
        return now + deadline
    if deadline <= now:
        raise InvalidInput(
            f"deadline {deadline.isoformat()} is not in the future "
            f"(the database clock reads {now.isoformat()})",
            field="deadline",
        )
    return deadline


def arm_deadline(run: Run, deadline: timedelta | datetime | None) -> datetime | None:
    """Give a run brought back by a replay its new deadline (or none): the moment, for
    the caller to store in ``Run.deadline``, and its timer, armed in this transaction.
    A scheduled deadline timer left from before is cancelled first."""
    due = deadline_of(deadline)
    cas_update_many(
        Timer,
        where={"run_id": run.pk, "kind": TimerKind.DEADLINE, "status": TimerStatus.SCHEDULED},
        status=TimerStatus.CANCELLED,
    )
    if due is not None:
        Timer.objects.create(run_id=run.pk, kind=TimerKind.DEADLINE, due_at=due)
    run.deadline = due
    return due


@fires_on_run(TimerKind.DEADLINE)
def deadline_passed(scope: RunScope, timer: Timer) -> None:
    """Fail the run whose deadline timer fired, unless it is over or unwinding already
    (:func:`workflows.engine.runs.fail_at_deadline`).

    Runs in the timer's transition, under the run lock. A worker completing an attempt
    of this run at the same moment either commits first (its result counts, and its
    compensation record is written, so it is undone with the rest) or after (its
    fenced write matches nothing: ``lease.lost``).
    """
    fail_at_deadline(scope.run, scope.events, scope.run.deadline or timer.due_at)


@when_run_ends
def cancel_deadline(run: Run, events: EventLog) -> None:
    """A run that ends takes its deadline timer with it (if it has one: no statement
    for a run without a deadline, which is most of them)."""
    if run.deadline is None:
        return
    cas_update_many(
        Timer,
        where={"run_id": run.pk, "kind": TimerKind.DEADLINE, "status": TimerStatus.SCHEDULED},
        status=TimerStatus.CANCELLED,
    )
