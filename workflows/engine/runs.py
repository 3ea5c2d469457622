"""Run-level transitions: running ⇄ waiting, completed, failed, and unwinding.

Each function is called inside a transition that already holds the run row (see
:func:`workflows.engine.sql.locks.lock_run`), so the run's status and version read there are
current. A run that fails or is cancelled first stops forward work, then *unwinds*:
once nothing it started is still running, its compensations run one at a time in
reverse completion order, and the run ends ``compensated``, ``failed``, ``cancelled``
or ``compensation_failed``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from workflows.definitions import FanOut, Workflow
from workflows.definitions.limits import Route
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.executor import Work
from workflows.engine.sql.counters import bump_item_counter
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import completed_outputs, step_statuses
from workflows.engine.sql.updates import cas_update, cas_update_many, move_row
from workflows.engine.work_kinds import COMPENSATION
from workflows.errors import StaleState
from workflows.models import CompensationRecord, FanOutItem, Run, Step, Timer
from workflows.status import (
    RUN_ACTIVE,
    RUN_FINAL,
    RUN_HELD,
    RUN_UNWINDING,
    STEP_IN_HAND,
    CompensationStatus,
    FailureClass,
    RunStatus,
    StepStatus,
    TimerStatus,
)

# Steps that have not started work yet (or wait on the outside): stopping cancels them.
_UNSTARTED = (
    StepStatus.PENDING,
    StepStatus.READY,
    StepStatus.WAITING,
    StepStatus.RETRY_SCHEDULED,
)
# Items not yet handed to a worker: stopping the run skips them.
_UNSTARTED_ITEM = (StepStatus.PENDING, StepStatus.READY, StepStatus.RETRY_SCHEDULED)
_COMPENSATION_IN_HAND = (
    CompensationStatus.READY,
    CompensationStatus.RUNNING,
    CompensationStatus.RETRY_SCHEDULED,
)


# Called in the same transaction when a run reaches a final status (child runs report
# to their parent this way); filled by the modules that care, so this one imports none.
RunEnded = Callable[[Run, EventLog], None]
_RUN_ENDED_HOOKS: list[RunEnded] = []


def when_run_ends(hook: RunEnded) -> RunEnded:
    """Register ``hook(run, events)`` to run inside every transition that ends a run."""
    _RUN_ENDED_HOOKS.append(hook)
    return hook


# Called in the same transaction when a run that had ended is brought back (a retry, a
# rerun); a hook may refuse by raising, which rolls the whole transition back.
_RUN_REVIVED_HOOKS: list[RunEnded] = []


def when_run_revives(hook: RunEnded) -> RunEnded:
    """Register ``hook(run, events)`` to run inside every transition that takes a run
    from a final status back to an unfinished one."""
    _RUN_REVIVED_HOOKS.append(hook)
    return hook


def set_run_status(
    run: Run,
    status: RunStatus,
    events: EventLog,
    *,
    event_details: dict[str, Any] | None = None,
    **changes: Any,
) -> None:
    """Compare-and-set the run from its status to ``status``; raise :class:`StaleState`
    if it moved; ``event_details`` go into its ``run.<status>`` event. Hooks registered
    with :func:`when_run_ends` run when it ends, those registered with
    :func:`when_run_revives` when it comes back from a final status, which also clears
    its dismissal (:mod:`workflows.engine.verbs.dismiss`)."""
    source = run.status
    if status in RUN_FINAL:
        changes.setdefault("finished_at", db_now())
    elif source in RUN_FINAL:
        # A dismissed run brought back (retry, rerun, a healed flow member) is live, and
        # only ended runs are dismissed: it shows in the lists again.
        changes.update(dismissed_at=None, dismissed_by=None)
    move_row(Run, run, status, f"run {run.pk}", details={"run": str(run.pk)}, **changes)
    for name in ("error", "output"):
        if name in changes:
            setattr(run, name, changes[name])
    events.add(run.pk, f"run.{status}", source=source, **(event_details or {}))
    if status in RUN_FINAL:
        for hook in _RUN_ENDED_HOOKS:
            hook(run, events)
    elif source in RUN_FINAL:
        for hook in _RUN_REVIVED_HOOKS:
            hook(run, events)


def update_locked_run(run: Run, doing: str, **changes: Any) -> None:
    """Compare-and-set ``changes`` on a run this transition holds, at the status and
    version read under its lock, keeping its status; on success ``run`` carries them and
    its new version. Raises :class:`StaleState` (``doing``: what was being done, for the
    message) if the run moved, which its lock makes a defect rather than a race."""
    if not cas_update(
        Run,
        run.pk,
        version=run.version,
        where={"status": run.status},
        updated_at=db_now(),
        **changes,
    ):
        raise StaleState(f"run {run.pk} changed while {doing}", run=str(run.pk))
    run.version += 1
    for name, value in changes.items():
        setattr(run, name, value)


def record_entry(
    events: EventLog,
    run: Run,
    workflow: type[Workflow],
    kind: str = "run.started",
    **about: Any,
) -> None:
    """The event of a run entering: ``run.started`` (or, as it is created, ``run.blocked``
    or ``run.queued``), naming its workflow, version and idempotency key, and ``about``."""
    events.add(
        run.pk,
        kind,
        workflow=workflow.name,
        version=workflow.version,
        idempotency_key=run.idempotency_key,
        **about,
    )


def settle_run(run: Run, sinks: tuple[str, ...], events: EventLog) -> None:
    """Bring the run's status in line with its steps: running, waiting or completed."""
    if run.status not in RUN_ACTIVE:
        return
    statuses = step_statuses(run.pk)
    if statuses <= {StepStatus.COMPLETED, StepStatus.SKIPPED}:
        set_run_status(run, RunStatus.COMPLETED, events, output=completed_outputs(run.pk, sinks))
    elif statuses & STEP_IN_HAND:
        if run.status != RunStatus.RUNNING:
            set_run_status(run, RunStatus.RUNNING, events)
    elif run.status != RunStatus.WAITING:
        set_run_status(run, RunStatus.WAITING, events)


def step_failure(step_name: str, error: dict[str, Any]) -> dict[str, Any]:
    """The run's error when a step failed for good: names the step, keeps the cause."""
    return {**error, "code": "step_failed", "step": step_name, "cause": error.get("code", "")}


def fail_run(run: Run, error: dict[str, Any], events: EventLog) -> None:
    """Fail the run with ``error``: stop forward work, then compensate what completed.

    A step failing with class ``cancelled`` in an active run with a deadline stopped
    because its run is past its deadline (``ctx.heartbeat()`` raised ``RunCancelled``
    before the deadline's timer fired): the run fails by its deadline, as the timer
    would have failed it (:func:`fail_at_deadline`), with the step's failure as cause.
    """
    if run.status not in RUN_ACTIVE:
        return
    if run.deadline is not None and error.get("failure_class") == FailureClass.CANCELLED:
        fail_at_deadline(run, events, run.deadline, cause=error)
        return
    stop_forward_work(run, events, reason="run failed")
    if work_in_flight(run) or pending_compensations(run):
        set_run_status(run, RunStatus.COMPENSATING, events, error=error)
        unwind(run, events)
    else:
        set_run_status(run, RunStatus.FAILED, events, error=error)


# The error code of a run that did not end by its deadline.
DEADLINE_EXCEEDED = "deadline_exceeded"
# Runs a deadline fails: every run not yet over, not yet unwinding.
FAILS_AT_DEADLINE = RUN_ACTIVE | RUN_HELD | {RunStatus.QUEUED, RunStatus.BLOCKED}
_LEASE_RELEASED: dict[str, Any] = {"lease_owner": "", "lease_expires_at": None}


def deadline_error(deadline: datetime) -> dict[str, Any]:
    """The run's error when its deadline passed: the code, and the deadline in words."""
    return {
        "code": DEADLINE_EXCEEDED,
        "message": "the run did not end by its deadline, "
        f"{deadline.isoformat(sep=' ', timespec='seconds')}",
        "deadline": deadline.isoformat(),
    }


def fail_at_deadline(
    run: Run, events: EventLog, deadline: datetime, *, cause: dict[str, Any] | None = None
) -> None:
    """Fail a run that did not end by its deadline (:mod:`workflows.engine.deadlines`).

    Like :func:`fail_run`, but work in flight does not get to finish: the run was to be
    over by now. Forward work stops, running steps and items lose their lease (recorded
    cancelled, class ``cancelled``: a worker's late result or heartbeat is fenced out),
    then what completed is compensated (``failed`` when there is nothing to undo). A
    paused, queued or blocked run fails too. A run over or unwinding is left alone.
    """
    if run.status not in FAILS_AT_DEADLINE:
        return
    error = deadline_error(deadline)
    if cause is not None:
        error["cause"] = cause
    was = run.status
    stop_forward_work(run, events, reason="deadline exceeded")
    take_running_leases(run, events, error, reason="deadline exceeded")
    changes: dict[str, Any] = {"error": error}
    if was in RUN_HELD:
        changes["paused_reason"] = ""
    events.add(run.pk, "run.deadline_exceeded", deadline=error["deadline"], status=was)
    if work_in_flight(run) or pending_compensations(run):
        set_run_status(run, RunStatus.COMPENSATING, events, **changes)
        unwind(run, events)
    else:
        set_run_status(run, RunStatus.FAILED, events, **changes)


def take_running_leases(run: Run, events: EventLog, error: dict[str, Any], *, reason: str) -> None:
    """Running steps and items lose their lease, recorded cancelled with class ``cancelled``.

    Each update restates ``running``: a unit whose worker committed its result a moment
    before is no longer running and keeps its outcome. Fan-out steps are not leased
    (:func:`stop_forward_work` cancels them); their running items are, and are skipped
    with their attempt's error, as a terminate skips them.
    """
    failed = {**error, "failure_class": FailureClass.CANCELLED.value}
    changes = {
        "error": failed,
        "failure_class": FailureClass.CANCELLED,
        "finished_at": db_now(),
        "updated_at": db_now(),
        **_LEASE_RELEASED,
    }
    stopped = cas_update_many(
        Step,
        where={"run_id": run.pk, "status": StepStatus.RUNNING},
        returning=("id", "name", "attempt"),
        status=StepStatus.CANCELLED,
        **changes,
    )
    for step_id, name, attempt in sorted(stopped):
        events.add(
            run.pk,
            "step.cancelled",
            step_id=step_id,
            step=name,
            reason=reason,
            attempt=attempt,
            failure_class=FailureClass.CANCELLED.value,
        )
    fanouts = list(
        Step.objects.filter(run_id=run.pk, kind=FanOut.kind).values_list("id", flat=True)
    )
    if not fanouts:
        return
    items = cas_update_many(
        FanOutItem,
        where={"step_id": fanouts, "status": StepStatus.RUNNING},
        returning=("step_id",),
        status=StepStatus.SKIPPED,
        **changes,
    )
    for step_id, count in sorted(Counter(step_id for (step_id,) in items).items()):
        bump_item_counter(step_id, "items_skipped", count)
        events.add(
            run.pk,
            "items.skipped",
            step_id=step_id,
            count=count,
            reason=reason,
            failure_class=FailureClass.CANCELLED.value,
        )


def stop_forward_work(run: Run, events: EventLog, *, reason: str, by: str | None = None) -> None:
    """Cancel steps that have not started, skip unstarted items, cancel their timers.
    ``by``: the caller whose act stops them, named in each ``step.cancelled`` event.

    Steps and items already running are left to finish (or lose their lease): their
    results are still recorded, and their compensations written, but nothing new starts.
    Each update restates the status its rows must still have, so a step a worker
    claimed a moment ago (claims do not take the run lock) keeps running; events are
    written for the rows actually changed. Child runs are cancelled by
    :func:`workflows.engine.verbs.children.cancel_children` after this transaction commits
    (a child is always locked before its parent).
    """
    changes = {"status": StepStatus.CANCELLED, "updated_at": db_now(), "finished_at": db_now()}
    stopped = cas_update_many(
        Step, where={"run_id": run.pk, "status": _UNSTARTED}, returning=("id", "name"), **changes
    )
    stopped += cas_update_many(
        Step,
        where={"run_id": run.pk, "status": StepStatus.RUNNING, "kind": FanOut.kind},
        returning=("id", "name"),
        **changes,
    )
    named = {"by": by} if by is not None else {}
    for pk, name in sorted(stopped):
        events.add(run.pk, "step.cancelled", step_id=pk, reason=reason, step=name, **named)
    fanouts = list(
        Step.objects.filter(run_id=run.pk, kind=FanOut.kind).values_list("id", flat=True)
    )
    if fanouts:
        skipped = cas_update_many(
            FanOutItem,
            where={"step_id": fanouts, "status": _UNSTARTED_ITEM},
            returning=("step_id",),
            status=StepStatus.SKIPPED,
            updated_at=db_now(),
        )
        for step_id, count in sorted(Counter(step_id for (step_id,) in skipped).items()):
            bump_item_counter(step_id, "items_skipped", count)
            events.add(
                run.pk, "items.skipped", step_id=step_id, count=count, reason=reason, **named
            )
    cas_update_many(
        Timer,
        where={"run_id": run.pk, "status": TimerStatus.SCHEDULED, "compensation_id": None},
        status=TimerStatus.CANCELLED,
    )


def reopen_cancelled_steps(run: Run) -> int:
    """Steps cancelled before they ran (by the run's end, or its stop) go back to
    ``pending``, for a run brought back: how many."""
    reopened = cas_update_many(
        Step,
        where={"run_id": run.pk, "status": StepStatus.CANCELLED},
        status=StepStatus.PENDING,
        finished_at=None,
        error=None,
        updated_at=db_now(),
    )
    return len(reopened)


def work_in_flight(run: Run) -> bool:
    """Tell whether anything the run started is still running (steps, items, children)."""
    return (
        Step.objects.filter(run_id=run.pk, status=StepStatus.RUNNING).exists()
        or FanOutItem.objects.filter(step__run_id=run.pk, status=StepStatus.RUNNING).exists()
        or Run.objects.filter(parent_run_id=run.pk).exclude(status__in=RUN_FINAL).exists()
    )


def pending_compensations(run: Run) -> bool:
    return CompensationRecord.objects.filter(
        run_id=run.pk, status=CompensationStatus.PENDING
    ).exists()


def cancelled_by(run: Run) -> dict[str, str]:
    """``{"by": caller}`` when the run's error names who cancelled it, else empty: its
    ``run.cancelled`` event names them too, however many transitions later it ends."""
    by = run.error.get("by") if isinstance(run.error, dict) else None
    return {"by": by} if by is not None else {}


def unwind(run: Run, events: EventLog) -> None:
    """Take the next step of a failing or cancelled run toward its end.

    Waits while work is in flight or a compensation is in hand; otherwise releases the
    compensation with the highest sequence (the latest completed work), or ends the run.
    """
    if run.status not in RUN_UNWINDING or work_in_flight(run):
        return
    records = CompensationRecord.objects.filter(run_id=run.pk)
    if records.filter(status__in=_COMPENSATION_IN_HAND).exists():
        return
    if records.filter(status=CompensationStatus.FAILED).exists():
        set_run_status(run, RunStatus.COMPENSATION_FAILED, events)
        return
    if run.skip_compensation:
        skipped = cas_update_many(
            CompensationRecord,
            where={"run_id": run.pk, "status": CompensationStatus.PENDING},
            status=CompensationStatus.SKIPPED,
            updated_at=db_now(),
        )
        if skipped:
            events.add(run.pk, "compensations.skipped", count=len(skipped))
    following = (
        records.filter(status=CompensationStatus.PENDING)
        .order_by("-sequence")
        .only("id", "version", "queue", "requires")
        .first()
    )
    if following is not None:
        if not cas_update(
            CompensationRecord,
            following.pk,
            version=following.version,
            where={"status": CompensationStatus.PENDING},
            status=CompensationStatus.READY,
            updated_at=db_now(),
        ):
            raise StaleState(f"compensation {following.pk} changed while released")
        events.add(run.pk, "compensation.ready", compensation=following.pk)
        enqueue(
            [Work(COMPENSATION, following.pk, Route.of_row(following.queue, following.requires))]
        )
        return
    if run.status == RunStatus.CANCELLING:
        set_run_status(run, RunStatus.CANCELLED, events, event_details=cancelled_by(run))
    elif records.filter(status=CompensationStatus.COMPLETED).exists():
        set_run_status(run, RunStatus.COMPENSATED, events)
    else:
        set_run_status(run, RunStatus.FAILED, events)
