"""Scanners: periodic sweeps that fire timers and take back work from dead workers.

Each scanner looks at every candidate on its own: it re-checks the row inside its own
transition, skips what another process changed first, logs and continues on errors,
and returns counts. All are safe to run concurrently with themselves. With
``dry_run`` a scanner only counts what it would act on.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Now
from django.utils import timezone

from workflows.conf import workflow_settings
from workflows.engine import ITEM, STEP, WORK_KINDS, fire_timer, reclaim
from workflows.engine.executor import uses_django_q
from workflows.engine.flows.cancellation import cancel_members, cancellations_to_finish
from workflows.engine.flows.heal import failed_flows_with_running_members, reopen_failed_flow
from workflows.engine.flows.settle import (
    blocked_members_to_decide,
    finish_flow,
    repair_member,
    sealed_flows_to_end,
)
from workflows.engine.guards import CANCEL
from workflows.engine.limits import slots
from workflows.engine.limits.admission import nudge_held
from workflows.engine.limits.run_limits import limit_of, slot_key, start_queued
from workflows.engine.recovery import (
    RECLAIM_GRACE,
    redispatch,
    repair_run,
)
from workflows.engine.retention.batches import ended_runs
from workflows.engine.verbs.cancel import cancel_run
from workflows.errors import DefinitionMissing, RunBusy
from workflows.hooks import deliver_events, hooked_types
from workflows.models import (
    CompensationRecord,
    Event,
    FanOutItem,
    Run,
    Step,
    Timer,
    WebhookEndpoint,
)
from workflows.models.leased import EXTERNAL_UNITS
from workflows.services.retention import purge_history
from workflows.status import (
    RUN_ACTIVE,
    RUN_ALIVE,
    RUN_FINAL,
    RUN_HELD,
    RUN_UNWINDING,
    CompensationStatus,
    RunStatus,
    StepStatus,
    TimerKind,
    TimerStatus,
)
from workflows.webhooks.enqueue import endpoints_due, nudge
from workflows.webhooks.sender import send_endpoint
from workflows.webhooks.services import delete_ended_deliveries, ended_deliveries

logger = logging.getLogger("workflows.scanners")

# Step states that will move on by themselves: a run with none of them is stuck.
_IN_FLIGHT = (
    StepStatus.READY,
    StepStatus.RUNNING,
    StepStatus.WAITING,
    StepStatus.RETRY_SCHEDULED,
)


@dataclass
class ScanResult:
    """How many candidates a scanner found, acted on, skipped (held elsewhere), failed on."""

    found: int = 0
    done: int = 0
    errors: int = 0
    skipped: int = 0


def _sweep(ids: list[Any], act: Callable[[Any], Any], label: str, dry_run: bool) -> ScanResult:
    result = ScanResult(found=len(ids))
    if dry_run:
        return result
    for pk in ids:
        try:
            if act(pk):
                result.done += 1
        except RunBusy as busy:
            result.skipped += 1
            logger.info("%s %s skipped: %s", label, pk, busy)
        except DefinitionMissing as missing:  # the run was failed with definition_missing
            result.done += 1
            logger.warning("%s %s: %s", label, pk, missing)
        except Exception:
            result.errors += 1
            logger.exception("%s %s failed; continuing", label, pk)
    return result


def _clock(now: datetime | None) -> datetime | Now:
    return now if now is not None else Now()


def fire_due_timers(
    *, now: datetime | None = None, limit: int = 1000, dry_run: bool = False
) -> ScanResult:
    """Fire timers due at ``now`` (default: the database clock); a paused run's wait,
    but for its deadline, which fails it paused or not."""
    ids = list(
        Timer.objects.filter(due_at__lte=_clock(now), status=TimerStatus.SCHEDULED)
        .exclude(Q(run__status__in=RUN_HELD) & ~Q(kind=TimerKind.DEADLINE))
        .order_by("due_at")
        .values_list("id", flat=True)[:limit]
    )
    return _sweep(ids, functools.partial(fire_timer, wait=False), "timer", dry_run)


def _merge(results: list[ScanResult]) -> ScanResult:
    return ScanResult(
        found=sum(r.found for r in results),
        done=sum(r.done for r in results),
        errors=sum(r.errors for r in results),
        skipped=sum(r.skipped for r in results),
    )


def reclaim_expired_leases(
    *, now: datetime | None = None, limit: int = 1000, dry_run: bool = False
) -> ScanResult:
    """Put back steps, items and compensations whose worker's lease expired.

    The expired attempt counts (class ``lease_expired``): the work is retried, or fails
    when its attempts are used or its policy's ``retry_on`` leaves the class out. On the
    database clock (``now`` not given), a lease is taken back ``RECLAIM_GRACE`` after it
    ran out: the watchdog of a live worker records its overrun as ``timeout`` first.
    """
    expired_before = now if now is not None else Now() - RECLAIM_GRACE
    results = []
    for kind in WORK_KINDS:
        ids = list(
            kind.model.objects.filter(
                lease_expires_at__lt=expired_before, status=StepStatus.RUNNING
            )
            .order_by("lease_expires_at")
            .values_list("id", flat=True)[:limit]
        )
        act = functools.partial(reclaim, kind, now=now, wait=False)
        results.append(_sweep(ids, act, f"lease of {kind.name}", dry_run))
    return _merge(results)


def redispatch_unclaimed(
    *, now: datetime | None = None, limit: int = 1000, dry_run: bool = False
) -> ScanResult:
    """Re-send ready work that nobody claimed within ``REDISPATCH_AFTER`` (lost nudges)."""
    ready_before = (now or timezone.now()) - workflow_settings.REDISPATCH_AFTER
    results = []
    for kind in WORK_KINDS:
        ids = list(
            kind.model.objects.filter(
                status=StepStatus.READY, updated_at__lt=ready_before, held_on=""
            )
            .exclude(**{f"{kind.run_path}__status__in": RUN_HELD})
            .exclude(EXTERNAL_UNITS)  # claimed from outside, never sent to a queue
            .order_by("-priority", "updated_at")  # re-sent highest priority first
            .values_list("id", flat=True)[:limit]
        )
        act = functools.partial(redispatch, kind, ready_before=ready_before)
        results.append(_sweep(ids, act, f"redispatch of {kind.name}", dry_run))
    return _merge(results)


def nudge_held_work(*, limit: int = 1000, dry_run: bool = False) -> ScanResult:
    """Re-send, once a pass, the best unit each limit holds (``held_on``), so a hold
    whose release was missed ends at the latest one pass later.

    The transitions that free a slot, fire a rate limit's release timer or raise a
    budget hand the held work on themselves; this covers the rest (a slot freed by a
    cancelled run, a budget period that ended). ``found`` counts the holds, ``done``
    the units re-sent; each claim decides again and holds its unit again, writing
    nothing, while the limit still binds.
    """
    results = []
    for kind in (STEP, ITEM):
        holds = list(
            kind.model.objects.filter(status=StepStatus.READY)
            .exclude(held_on="")
            .order_by("held_on")
            .values_list("held_on", flat=True)
            .distinct()[:limit]
        )
        act = functools.partial(nudge_held, kind)
        results.append(_sweep(holds, act, f"held {kind.name}", dry_run))
    return _merge(results)


def repair_stuck_runs(*, limit: int = 1000, dry_run: bool = False) -> ScanResult:
    """Move on runs that nothing would ever wake.

    An active run with no step in flight is settled; an unwinding run with no work and
    no compensation in hand releases its next compensation or ends.
    """
    in_flight = Step.objects.filter(run=OuterRef("pk"), status__in=_IN_FLIGHT)
    running_items = FanOutItem.objects.filter(step__run=OuterRef("pk"), status=StepStatus.RUNNING)
    compensating = CompensationRecord.objects.filter(
        run=OuterRef("pk"),
        status__in=(
            CompensationStatus.READY,
            CompensationStatus.RUNNING,
            CompensationStatus.RETRY_SCHEDULED,
        ),
    )
    active_children = Run.objects.filter(parent_run=OuterRef("pk")).exclude(status__in=RUN_FINAL)
    # Two queries, each reading only its statuses through the status index; one query
    # with an OR of both walks every run ever kept.
    stuck = Run.objects.filter(status__in=RUN_ACTIVE).exclude(Exists(in_flight))
    unwinding = (
        Run.objects.filter(status__in=RUN_UNWINDING)
        .exclude(Exists(Step.objects.filter(run=OuterRef("pk"), status=StepStatus.RUNNING)))
        .exclude(Exists(running_items))
        .exclude(Exists(compensating))
        .exclude(Exists(active_children))
    )
    ids = [
        pk
        for candidates in (stuck, unwinding)
        for pk in candidates.order_by("updated_at").values_list("id", flat=True)[:limit]
    ][:limit]
    return _sweep(ids, functools.partial(repair_run, wait=False), "repair of run", dry_run)


def cancel_orphaned_children(*, limit: int = 1000, dry_run: bool = False) -> ScanResult:
    """Cancel child runs whose parent stopped (failed, cancelled, unwinding): every child
    a cancel accepts, a paused or queued one too, or its parent would wait for it in
    ``compensating`` until an operator resumed it."""
    ids = list(
        Run.objects.filter(status__in=CANCEL.accepts, parent_run__isnull=False)
        .exclude(parent_run__status__in=RUN_ALIVE)
        # No order: ordered (the model's newest first), the planner walks every run by
        # creation date instead of the few children through workflows_run_children.
        .order_by()
        .values_list("id", flat=True)[:limit]
    )
    return _sweep(
        ids, lambda pk: cancel_run(pk, reason="parent run stopped") or True, "cancel of", dry_run
    )


def start_queued_runs(*, limit: int = 1000, dry_run: bool = False) -> ScanResult:
    """Start queued runs whose workflow has a free place under ``max_concurrent_runs``.

    The transition that ends a run starts the next queued one itself; this is the
    backstop for places freed otherwise (a run deleted, a limit raised or removed in a
    new deploy). ``found`` counts the queued runs that free places allow to start,
    ``skipped`` those another transaction held (they start on a later pass).
    """
    result = ScanResult()
    queued = Run.objects.filter(status=RunStatus.QUEUED)
    names = list(queued.order_by().values_list("workflow_name", flat=True).distinct()[:limit])
    for name in names:
        waiting = queued.filter(workflow_name=name).count()
        places = limit_of(name)
        free = waiting if places is None else max(0, places - slots.held(slot_key(name)))
        result.found += min(waiting, free)
        if dry_run or not free:
            continue
        try:
            filled = start_queued(name)
        except Exception:
            result.errors += 1
            logger.exception("queued runs of %s: start failed; continuing", name)
            continue
        result.done += filled.started
        result.skipped += filled.skipped
    return result


def repair_flows(*, limit: int = 1000, dry_run: bool = False) -> ScanResult:
    """Decide blocked flow members whose join is decided, and end sealed flows whose
    members have all ended: the backstop for what a process that died after its commit
    left to do (a batch of downstream members, a flow's end), and reopen flows that
    read ``failed`` while a member runs again (:mod:`workflows.engine.flows.heal`)."""
    members = _sweep(blocked_members_to_decide(limit), repair_member, "flow member", dry_run)
    flows = _sweep(
        sealed_flows_to_end(limit), lambda pk: finish_flow(pk) is not None, "end of flow", dry_run
    )
    reopened = _sweep(
        failed_flows_with_running_members(limit), reopen_failed_flow, "reopened flow", dry_run
    )
    parts = (members, flows, reopened)
    return ScanResult(
        found=sum(part.found for part in parts),
        done=sum(part.done for part in parts),
        errors=sum(part.errors for part in parts),
        skipped=sum(part.skipped for part in parts),
    )


def finish_flow_cancellations(*, limit: int = 1000, dry_run: bool = False) -> ScanResult:
    """Cancel the members of cancelled flows whose cancellation a process that died left
    half done (the flow closed, its policy stored, not every covered member cancelled)."""
    return _sweep(cancellations_to_finish(limit), cancel_members, "cancellation of flow", dry_run)


def purge_finished_runs(
    *, older_than: timedelta | None = None, dry_run: bool = False
) -> ScanResult:
    """Delete the history of top-level runs ended longer than ``older_than`` ago (default:
    the ``RETENTION`` setting), in batches aiming at ``RETENTION_BATCH_MS`` each, for at
    most about ``RETENTION_PASS_TIME``: a backlog is purged over several passes, and a
    pass never keeps the sweeper from its timers for longer than that
    (:mod:`workflows.services.retention`).

    Does nothing when neither is set: history is kept forever unless asked otherwise.
    ``skipped`` counts runs read but kept (reopened meanwhile, a child run still going).
    """
    retention = older_than if older_than is not None else workflow_settings.RETENTION
    if retention is None:
        return ScanResult()
    before = timezone.now() - retention
    if dry_run:
        return ScanResult(found=ended_runs(before).count())
    report = purge_history(before=before, time_limit=workflow_settings.RETENTION_PASS_TIME)
    return ScanResult(found=report.runs + report.kept, done=report.runs, skipped=report.kept)


def deliver_hooks(*, limit: int = 500, dry_run: bool = False) -> ScanResult:
    """Send the hook of every committed event not yet delivered (:mod:`workflows.hooks`).

    ``done`` counts events delivered, with or without a hook; ``errors`` counts hook
    receivers that raised (logged; their events are not sent again).
    """
    if dry_run:
        return ScanResult(found=Event.objects.filter(published=False).count())
    delivery = deliver_events(limit=limit)
    return ScanResult(
        found=delivery.claimed, done=delivery.claimed, errors=delivery.receiver_errors
    )


def events_awaited() -> bool:
    """Whether anything waits for committed events to be delivered promptly: a hook
    receiver connected in this process, or an enabled webhook endpoint (whose deliveries
    the claim records). When nothing does, delivering only marks events published."""
    return bool(hooked_types()) or WebhookEndpoint.objects.filter(enabled=True).exists()


def send_webhooks(
    *, now: datetime | None = None, limit: int = 1000, dry_run: bool = False
) -> ScanResult:
    """Send the due webhook deliveries of each endpoint (:mod:`workflows.webhooks`).

    With django-q2 it only nudges: one ``send_webhooks`` task per endpoint whose head
    delivery is due (a retry that came due, a lost nudge, a sender that vanished);
    ``done`` counts the tasks sent. Otherwise it sends in this process and ``done``
    counts the endpoints that got an attempt.
    """
    ids = endpoints_due(now=now, limit=limit)
    if not uses_django_q():
        return _sweep(ids, functools.partial(send_endpoint, now=now), "webhooks of", dry_run)
    if not dry_run:
        nudge(ids)
    return ScanResult(found=len(ids), done=0 if dry_run else len(ids))


def purge_webhook_deliveries(
    *, older_than: timedelta | None = None, limit: int = 1000, dry_run: bool = False
) -> ScanResult:
    """Delete webhook deliveries that ended longer ago than ``RETENTION`` (the log's
    retention is the history's); nothing while it is None."""
    retention = older_than if older_than is not None else workflow_settings.RETENTION
    if retention is None:
        return ScanResult()
    ended_before = timezone.now() - retention
    if dry_run:
        return ScanResult(found=min(ended_deliveries(ended_before).count(), limit))
    deleted = delete_ended_deliveries(ended_before=ended_before, limit=limit)
    return ScanResult(found=deleted, done=deleted)


RECOVERY_SCANNERS: dict[str, Callable[..., ScanResult]] = {
    "fire_due_timers": fire_due_timers,
    "reclaim_expired_leases": reclaim_expired_leases,
    "redispatch_unclaimed": redispatch_unclaimed,
    "nudge_held_work": nudge_held_work,
    "repair_stuck_runs": repair_stuck_runs,
    "cancel_orphaned_children": cancel_orphaned_children,
    "start_queued_runs": start_queued_runs,
    "finish_flow_cancellations": finish_flow_cancellations,
    "repair_flows": repair_flows,
    "purge_finished_runs": purge_finished_runs,
    "deliver_hooks": deliver_hooks,
    "send_webhooks": send_webhooks,
    "purge_webhook_deliveries": purge_webhook_deliveries,
}


def recover(*, dry_run: bool = False, skip: Collection[str] = ()) -> dict[str, ScanResult]:
    """Run every scanner once (but those named in ``skip``), in order, and return what
    each found and did."""
    return {
        name: scan(dry_run=dry_run) for name, scan in RECOVERY_SCANNERS.items() if name not in skip
    }
