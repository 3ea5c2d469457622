"""The reads of one explanation, each for the whole run (:data:`QUERIES`).

Read side: nothing here writes or opens a transaction (under SQLite's IMMEDIATE mode
even a read-only ``atomic()`` takes the write lock). The database computes the flags
(lease expired, timer overdue, work undispatched) and the attention class from the
predicates in :mod:`workflows.queries`, the same ones that filter a list of runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, cast
from uuid import UUID

from django.db.models import (
    BooleanField,
    Case,
    Count,
    F,
    Func,
    IntegerField,
    JSONField,
    OuterRef,
    Q,
    Subquery,
    Value,
    When,
)
from django.db.models.query import QuerySet

from workflows.engine.limits import slots
from workflows.engine.work_kinds import COMPENSATION, ITEM, STEP, WorkKind
from workflows.holds import HoldKind, held_marker
from workflows.models import CompensationRecord, Event, FanOutItem, Run, Step, Timer
from workflows.queries import (
    attention_of,
    expired_lease,
    get_run,
    overdue_timer,
    undispatched_unit,
)
from workflows.queries.explain.reading import UNIT_FIELDS, Unit
from workflows.queries.frames import STEP_TELEMETRY_FIELDS
from workflows.queries.workers import live_workers
from workflows.status import (
    RUN_FINAL,
    CompensationStatus,
    RunStatus,
    StepStatus,
    TimerStatus,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _RunFacts(TypedDict):
        """What :func:`run_row` annotates the run with; the pause, cancel and queue facts
        are ``None`` unless the run is paused, cancelling or queued."""

        attention: str
        paused_by: str | None
        paused_at: datetime | None
        cancel_requested_at: datetime | None
        queued_ahead: int | None

    ExplainedRun = WithAnnotations[Run, _RunFacts]

__all__ = [
    "CONCURRENCY_KEYS_COUNTED",
    "QUERIES",
    "compensations_in_hand",
    "held_slots",
    "item_counts",
    "items_in_hand",
    "last_failure",
    "live_children",
    "live_worker_routes",
    "run_row",
    "scheduled_timers",
    "steps_of",
    "telemetry",
]


# The queries one explanation costs: run, steps, scheduled timers, item counts, items
# in hand, compensations in hand, live child runs. Plus one, the live workers, when the
# run has ready work and django-q2 workers run it; plus one per concurrency limit its
# ready work is held under, for at most this many limits (a fan-out's items may each
# have their own key); the entries of the others leave out how many slots are held.
QUERIES = 7
CONCURRENCY_KEYS_COUNTED = 3

# The history entry a pause writes: who paused the run, and when.
PAUSE_EVENT = "run.pause_requested"
# The history entry of a run's move to ``cancelling`` (by a cancel, or its flow's).
CANCELLING_EVENT = f"run.{RunStatus.CANCELLING}"


# What the claim writes into the ``held_on`` of work a concurrency limit holds:
# ``concurrency:<key>`` (each limit's hold kind, then its key).
_CONCURRENCY = held_marker(HoldKind.CONCURRENCY, "")
# Units loaded one by one: the ones a worker holds or should pick up. The rest of a
# fan-out's items are only counted.
_ITEMS_IN_HAND = (StepStatus.READY, StepStatus.RUNNING)

_COMPENSATIONS_IN_HAND = (
    CompensationStatus.READY,
    CompensationStatus.RUNNING,
    CompensationStatus.RETRY_SCHEDULED,
)


def run_row(run_id: UUID | str, now: datetime) -> ExplainedRun:
    """The run with its attention class and, when paused, who paused it and when; when
    cancelling, since when."""
    last_pause = Event.objects.filter(run_id=OuterRef("pk"), type=PAUSE_EVENT).order_by("-id")
    last_cancel = Event.objects.filter(run_id=OuterRef("pk"), type=CANCELLING_EVENT).order_by("-id")
    # get_run returns a row of the queryset it is given, annotated as below; its
    # signature (and RunQuerySet) only says Run.
    row = get_run(
        run_id,
        runs=Run.objects.defer("input", "output").annotate(
            attention=attention_of(now),
            # CASE evaluates the subqueries for a paused run only: a long history of a
            # run that is not paused is never scanned.
            paused_by=Case(
                When(
                    status=RunStatus.PAUSED,
                    then=Subquery(last_pause.values("payload__by")[:1]),
                ),
                output_field=JSONField(),
            ),
            paused_at=Case(
                When(
                    status=RunStatus.PAUSED,
                    then=Subquery(last_pause.values("created_at")[:1]),
                )
            ),
            cancel_requested_at=Case(
                When(
                    status=RunStatus.CANCELLING,
                    then=Subquery(last_cancel.values("created_at")[:1]),
                )
            ),
            # Likewise counted for a queued run only: the queued runs of its workflow
            # that start before it (highest priority first, oldest first).
            queued_ahead=Case(
                When(status=RunStatus.QUEUED, then=Subquery(_queued_ahead())),
                output_field=IntegerField(),
            ),
        ),
    )
    return cast("ExplainedRun", row)


def _queued_ahead() -> QuerySet[Run, dict[str, Any]]:
    """The number of queued runs of the outer run's workflow that start before it."""
    ahead = Q(priority__gt=OuterRef("priority")) | Q(
        priority=OuterRef("priority"), created_at__lt=OuterRef("created_at")
    )
    ahead |= Q(
        priority=OuterRef("priority"), created_at=OuterRef("created_at"), id__lt=OuterRef("id")
    )
    return (
        Run.objects.filter(ahead, workflow_name=OuterRef("workflow_name"), status=RunStatus.QUEUED)
        .order_by()
        .annotate(ahead=Func(F("id"), function="COUNT"))
        .values("ahead")
    )


def live_worker_routes(now: datetime) -> list[tuple[frozenset[str], frozenset[str]]]:
    """What each live worker serves: its queues and its capabilities."""
    return [
        (frozenset(queues), frozenset(capabilities))
        for queues, capabilities in live_workers(now).values_list("queues", "capabilities")
    ]


def held_slots(ready: list[Unit]) -> dict[str, int]:
    """How many slots are held under each concurrency limit ready work waits on: one
    query per limit, for the first :data:`CONCURRENCY_KEYS_COUNTED` of them."""
    keys = sorted(
        {
            unit.held_on.removeprefix(_CONCURRENCY)
            for unit in ready
            if unit.held_on.startswith(_CONCURRENCY)
        }
    )
    return {key: slots.held(key) for key in keys[:CONCURRENCY_KEYS_COUNTED]}


def steps_of(run_id: UUID, now: datetime) -> list[dict[str, Any]]:
    """Every step, without its output (a fan-out's holds every item's)."""
    return list(
        Step.objects.filter(run_id=run_id)
        .order_by("id")
        .annotate(step_id=F("id"), **_unit_flags(STEP, now))
        .values(
            "id",
            "step_id",
            "name",
            "kind",
            "prompt",
            "permission",
            "assignees",
            "claimed_by__username",
            "claimed_at",
            "signal_name",
            "awaiting",
            "items_total",
            "items_completed",
            "items_failed",
            "items_skipped",
            "lease_expired",
            "undispatched",
            "generation",
            "iteration",
            "failure_class",
            "round_attempts_before",
            *UNIT_FIELDS,
            *STEP_TELEMETRY_FIELDS,
        )
    )


def telemetry(step: Mapping[str, Any]) -> dict[str, Any]:
    """A step's telemetry as JSON-ready data (the time as ISO 8601), read with the step's
    row at no extra query."""
    reported = {name: step[name] for name in STEP_TELEMETRY_FIELDS}
    if reported["progress_at"] is not None:
        reported["progress_at"] = reported["progress_at"].isoformat()
    return reported


# A step in one of these statuses with a failure class: its last attempt failed (it
# waits for a retry or an operator, or failed for good).
_AFTER_A_FAILED_ATTEMPT = (StepStatus.FAILED, StepStatus.RETRY_SCHEDULED, StepStatus.READY)


def last_failure(step: dict[str, Any]) -> str | None:
    """``"last attempt failed: timeout"`` when the step's last attempt failed, in words."""
    if step["failure_class"] and step["status"] in _AFTER_A_FAILED_ATTEMPT:
        return f"last attempt failed: {step['failure_class']}"
    return None


def scheduled_timers(run_id: UUID, now: datetime) -> list[dict[str, Any]]:
    return list(
        Timer.objects.filter(run_id=run_id, status=TimerStatus.SCHEDULED)
        .order_by("due_at", "id")
        .annotate(overdue=_flag(overdue_timer(now)))
        .values(
            "kind",
            "due_at",
            "overdue",
            "step_id",
            "item__key",
            "compensation__sequence",
            "compensation__step_id",
        )
    )


def item_counts(run_id: UUID) -> dict[tuple[int, str], int]:
    """How many items of each fan-out of the run are in each status: one grouped query."""
    return {
        (count["step_id"], count["status"]): count["items"]
        for count in FanOutItem.objects.filter(step__run_id=run_id)
        .values("step_id", "status")
        .annotate(items=Count("id"))
        .order_by()
    }


def items_in_hand(run_id: UUID, now: datetime) -> list[dict[str, Any]]:
    """Ready and running items: at most ``max_parallel`` per fan-out, whatever its size."""
    return list(
        FanOutItem.objects.filter(step__run_id=run_id, status__in=_ITEMS_IN_HAND)
        .order_by("step_id", "index")
        .annotate(item_key=F("key"), **_unit_flags(ITEM, now))
        .values("step_id", "item_key", "lease_expired", "undispatched", *UNIT_FIELDS)
    )


def compensations_in_hand(run_id: UUID, now: datetime) -> list[dict[str, Any]]:
    """Compensations started and not finished, newest first (the order they run in)."""
    return list(
        CompensationRecord.objects.filter(run_id=run_id, status__in=_COMPENSATIONS_IN_HAND)
        .order_by("-sequence")
        .annotate(item_key=F("item__key"), **_unit_flags(COMPENSATION, now))
        .values(
            "step_id",
            "item_key",
            "sequence",
            "handler",
            "lease_expired",
            "undispatched",
            *UNIT_FIELDS,
        )
    )


def live_children(run_id: UUID) -> list[Mapping[str, Any]]:
    """Child runs not yet final: of ``SubWorkflow`` steps and of fan-out items."""
    return list(
        Run.objects.filter(parent_run_id=run_id)
        .exclude(status__in=RUN_FINAL)
        .order_by("created_at", "id")
        .values("id", "workflow_name", "status", "parent_step_id", "parent_item__key")
    )


def _unit_flags(kind: WorkKind, now: datetime) -> dict[str, Case]:
    """Whether a unit's lease expired and whether it waits undispatched, as of ``now``."""
    return {
        "lease_expired": _flag(expired_lease(now)),
        "undispatched": _flag(undispatched_unit(kind, now)),
    }


def _flag(condition: Q) -> Case:
    """``condition`` as a column that is never NULL (a NULL lease compares as unknown)."""
    return Case(
        When(condition, then=Value(True)), default=Value(False), output_field=BooleanField()
    )
