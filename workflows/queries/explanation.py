"""``explain(run)``: what a run waits on, what an operator may do about it, and whether it
needs attention, as data that every surface (commands, admin, API) shows alike.

Read side, like :mod:`workflows.queries`: nothing here writes or opens a transaction
(under SQLite's IMMEDIATE mode even a read-only ``atomic()`` takes the write lock).

An explanation costs :data:`QUERIES` queries whatever the size of the run: each table
is read once for the whole run, fan-out items are counted by one grouped query and
only the items in hand are loaded, and the database computes the flags (lease
expired, timer overdue, work undispatched) and the attention class from the predicates
in :mod:`workflows.queries`, the same ones that filter a list of runs by attention.
The reads are not one snapshot: a run moving meanwhile may show a step a moment newer
than the run row, which an operator's view can live with.

Ready work that does not start says why, most specific first: no running worker serves
its route (``worker``; one more query, the live workers, when the run has ready work
and workers run it), a limit holds it (``concurrency``, ``rate``, ``budget``, from the
``held_on`` the claim wrote; a concurrency hold adds one query per limit for its held
slots, at most :data:`CONCURRENCY_KEYS_COUNTED`), else it waits for a worker to pick it
up (``dispatch``). A ``queued`` run waits for a place under ``max_concurrent_runs``.

A flow member's explanation says its place in the flow (``flow``: the flow, its join,
its upstream members and their statuses, and for a member cancelled with
``dependency_failed`` the upstream that failed), read with two more queries for flow
members only (:data:`FLOW_QUERIES`). A ``blocked`` member waits on its upstream members
under its join (a ``flow`` entry, in words); one whose join is already decided says the
``repair_flows`` scanner will start or cancel it.

A run with a deadline says when it falls and how long is left (``deadline``,
``time_left``: negative once it passed). An ended run's replay verbs say why not where
what became of its completed work refuses them (:mod:`workflows.engine.replay`): the
run's ``retry``, and a ``rerun`` entry per step a rerun may not start from, read with one
more query for ended runs of workflows that declare compensations
(:data:`REPLAY_QUERIES`).

A run whose workflow declares loops says where each stands (``loops``, one entry per
``Loop`` node and per polling task, read from the definition and the rows already
read: no query): the round it is in, its bound, and in words what ends it. A polling
task between two iterations waits on its ``repeat`` timer (a ``poll`` entry of
``waiting_on``, with the time of its next poll), not on a callback.

Each step says the failure class of its last failed attempt (``failure_class``) and,
while that attempt is its last one (the step failed, waits for its retry, or is ready
again after a reclaim or a revoke), says so in words: ``last_failure``, ``"last attempt
failed: timeout"``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
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
from django.utils import timezone

from workflows.conf import workflow_settings
from workflows.definitions import (
    FanOut,
    Gate,
    LeasedNode,
    Loop,
    Task,
    WaitForSignal,
    Workflow,
    registry,
)
from workflows.definitions.limits import Route
from workflows.engine.executor import uses_django_q
from workflows.engine.flows.heal import cancelled_for_dependency, unmet_reason
from workflows.engine.flows.joins import JoinRule, JoinSpec, Verdict
from workflows.engine.guards import RERUN, RETRY, RUN_VERBS, STEP_VERBS
from workflows.engine.limits import slots
from workflows.engine.replay import (
    downstream_of,
    facts_of,
    rerun_compensation_refusal,
    retry_plan,
)
from workflows.engine.work_kinds import COMPENSATION, ITEM, STEP, WorkKind
from workflows.errors import DefinitionMissing
from workflows.models import (
    CompensationRecord,
    Event,
    FanOutItem,
    FlowEdge,
    FlowMember,
    Run,
    Step,
    Timer,
)
from workflows.queries import (
    attention_of,
    expired_lease,
    get_run,
    overdue_timer,
    undispatched_unit,
)
from workflows.queries.frames import STEP_TELEMETRY_FIELDS
from workflows.queries.workers import live_workers
from workflows.status import (
    RUN_FINAL,
    STEP_FINAL,
    CompensationStatus,
    FlowStatus,
    RunStatus,
    StepStatus,
    TimerKind,
    TimerStatus,
    attempt_in_round,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _RunFacts(TypedDict):
        """What :func:`_run_row` annotates the run with; the pause and queue facts are
        ``None`` unless the run is paused or queued."""

        attention: str
        paused_by: str | None
        paused_at: datetime | None
        queued_ahead: int | None

    _ExplainedRun = WithAnnotations[Run, _RunFacts]

__all__ = [
    "CONCURRENCY_KEYS_COUNTED",
    "FLOW_QUERIES",
    "QUERIES",
    "REPLAY_QUERIES",
    "Action",
    "Explanation",
    "FlowPlace",
    "WaitingOn",
    "explain",
]

# The queries one explanation costs: run, steps, scheduled timers, item counts, items
# in hand, compensations in hand, live child runs. Plus one, the live workers, when the
# run has ready work and django-q2 workers run it; plus one per concurrency limit its
# ready work is held under, for at most this many limits (a fan-out's items may each
# have their own key); the entries of the others leave out how many slots are held.
QUERIES = 7
CONCURRENCY_KEYS_COUNTED = 3
# The queries a flow member's explanation adds: its member row with the flow's, and its
# upstream members with their runs' statuses.
FLOW_QUERIES = 2
# The query an ended run's explanation adds when its workflow declares compensations:
# what became of the work its steps completed (the replay verbs' refusals).
REPLAY_QUERIES = 1

# The error code of a flow member cancelled because its join can no longer be satisfied
# (written by ``workflows.engine.flows.settle``).
DEPENDENCY_FAILED = "dependency_failed"

# The history entry a pause writes: who paused the run, and when.
PAUSE_EVENT = "run.pause_requested"
# What the claim writes into a held unit's ``held_on``: ``<prefix><key>``.
CONCURRENCY, RATE, BUDGET = "concurrency:", "rate:", "budget:"
# Units loaded one by one: the ones a worker holds or should pick up. The rest of a
# fan-out's items are only counted.
_ITEMS_IN_HAND = (StepStatus.READY, StepStatus.RUNNING)
_COMPENSATIONS_IN_HAND = (
    CompensationStatus.READY,
    CompensationStatus.RUNNING,
    CompensationStatus.RETRY_SCHEDULED,
)
# Scheduled timers that are no entry of ``waiting_on``: told otherwise.
_UNTOLD_TIMERS = frozenset({TimerKind.RELEASE, TimerKind.DEADLINE, TimerKind.REPEAT})
_UNIT_FIELDS = (
    "status",
    "attempt",
    "max_attempts",
    "lease_owner",
    "lease_expires_at",
    "updated_at",
    "queue",
    "requires",
    "held_on",
)


@dataclass(frozen=True)
class WaitingOn:
    """One thing that holds the run: its kind, the step it belongs to, and details."""

    kind: str
    step: str | None
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, **_json_ready(dict(self.details))}


@dataclass(frozen=True)
class Action:
    """One operator verb, on the run or on one step, and whether it is allowed now.

    ``reason`` says in words why not (the guard's own wording); ``None`` when allowed.
    What a surface shows is advice: the verb checks again under the run lock.
    """

    verb: str
    allowed: bool
    reason: str | None
    summary: str
    step: str | None = None
    step_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "verb": self.verb,
            "step": self.step,
            "step_id": self.step_id,
            "allowed": self.allowed,
            "reason": self.reason,
            "summary": self.summary,
        }


@dataclass(frozen=True)
class FlowPlace:
    """A flow member's place in its flow: the flow, the member's join, its upstream
    members (``member``, ``run``, ``status``, in the order their edges were staged) and,
    for a member cancelled with ``dependency_failed`` because of one, the upstream member
    that failed (``member``, ``status``)."""

    flow: UUID
    flow_name: str
    flow_status: str
    revision: int
    member: str
    join: JoinSpec
    join_words: str
    upstream: tuple[Mapping[str, str], ...]
    failed_upstream: Mapping[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": str(self.flow),
            "flow_name": self.flow_name,
            "flow_status": self.flow_status,
            "revision": self.revision,
            "member": self.member,
            "join": self.join,
            "join_words": self.join_words,
            "upstream": [dict(entry) for entry in self.upstream],
            "failed_upstream": dict(self.failed_upstream) if self.failed_upstream else None,
        }


@dataclass(frozen=True)
class Explanation:
    """Where a run stands, what holds it, what an operator may do, whether it needs one.

    ``version`` is the run row's compare-and-set version: a surface that acts on what
    it showed can tell whether the run moved since. ``as_of`` is the moment the flags
    and the attention class were computed for. ``flow`` is the run's place in its flow,
    ``None`` for a run that is no flow's member. ``deadline``: when the run must have
    ended (``None``: no deadline); :attr:`time_left` is counted from ``as_of``.
    ``loops``: where each loop and polling task of the run stands, in declaration order
    (see :func:`_loops` for an entry's keys).
    """

    run: UUID
    workflow: str
    workflow_version: int
    status: str
    version: int
    attention: str
    as_of: datetime
    waiting_on: tuple[WaitingOn, ...]
    allowed_actions: tuple[Action, ...]
    steps: tuple[Mapping[str, Any], ...]
    flow: FlowPlace | None = None
    deadline: datetime | None = None
    loops: tuple[Mapping[str, Any], ...] = ()

    @property
    def time_left(self) -> timedelta | None:
        """How long until the deadline, as of ``as_of``: negative once it passed."""
        return self.deadline - self.as_of if self.deadline is not None else None

    @property
    def deadline_passed(self) -> bool:
        return self.deadline is not None and self.deadline <= self.as_of

    def as_dict(self) -> dict[str, Any]:
        """The explanation as JSON-ready data: times as ISO 8601 strings, the time left
        in seconds."""
        left = self.time_left
        return {
            "run": str(self.run),
            "workflow": self.workflow,
            "workflow_version": self.workflow_version,
            "status": self.status,
            "version": self.version,
            "attention": self.attention,
            "as_of": self.as_of.isoformat(),
            "waiting_on": [entry.as_dict() for entry in self.waiting_on],
            "allowed_actions": [action.as_dict() for action in self.allowed_actions],
            "steps": [dict(step) for step in self.steps],
            "flow": self.flow.as_dict() if self.flow else None,
            "deadline": self.deadline.isoformat() if self.deadline is not None else None,
            "time_left": left.total_seconds() if left is not None else None,
            "deadline_passed": self.deadline_passed,
            "loops": [_json_ready(dict(entry)) for entry in self.loops],
        }


@dataclass(frozen=True)
class _Unit:
    """A step, item or compensation as far as leases and dispatch are concerned."""

    kind: WorkKind
    step_id: int
    item: str | None
    status: str
    attempt: int
    max_attempts: int
    lease_owner: str
    lease_expires_at: datetime | None
    updated_at: datetime
    queue: str
    requires: str
    held_on: str
    lease_expired: bool
    undispatched: bool

    @property
    def holds_lease(self) -> bool:
        """A worker runs it (a fan-out step is ``running`` without a lease)."""
        return self.status == StepStatus.RUNNING and self.lease_expires_at is not None

    @property
    def route(self) -> Route:
        return Route.of_row(self.queue, self.requires)


def explain(run: Run | UUID | str, *, now: datetime | None = None) -> Explanation:
    """Explain ``run`` (a run or its id) as it stands now; see the module docstring.

    ``now`` (default: this host's clock) is the moment leases, timers and ready work are
    judged at; tests pass a later one to let time pass. Raises
    :class:`~workflows.RunNotFound` for an unknown or malformed id.
    """
    now = now or timezone.now()
    row = _run_row(run.pk if isinstance(run, Run) else run, now)
    steps = _steps(row.pk, now)
    timers = _scheduled_timers(row.pk, now)
    item_counts = _item_counts(row.pk)
    items = _items_in_hand(row.pk, now)
    compensations = _compensations_in_hand(row.pk, now)
    children = _live_children(row.pk)
    place = _flow_place(row) if row.flow_id is not None else None

    reading = _Reading(row, steps, timers, item_counts)
    units = [
        *(_unit(STEP, step, item=None) for step in steps),
        *(_unit(ITEM, item, item=item["item_key"]) for item in items),
        *(_unit(COMPENSATION, record, item=record["item_key"]) for record in compensations),
    ]
    ready = [unit for unit in units if unit.status == StepStatus.READY]
    if ready and uses_django_q():
        reading.workers = _live_workers(now)
    reading.held_slots = _held_slots(ready)
    waiting_on = [
        *_paused(row),
        *_queued(row),
        *_blocked(row, place),
        *(
            entry
            for step in steps
            if step["status"] not in STEP_FINAL
            and (hold := _STEP_HOLDS.get(step["kind"])) is not None
            and (entry := hold(reading, step)) is not None
        ),
        *(_child(reading, child) for child in children),
        *(_compensation(reading, record) for record in compensations),
        # A release timer is told by its unit's rate hold, with its due time; a deadline
        # holds nothing (it ends the run): ``deadline`` and ``time_left`` tell it.
        *(_timer(reading, timer) for timer in timers if timer["kind"] not in _UNTOLD_TIMERS),
        *(_lease(reading, unit) for unit in units if unit.holds_lease),
        *(_ready(reading, unit) for unit in ready),
    ]
    return Explanation(
        run=row.pk,
        workflow=row.workflow_name,
        workflow_version=row.workflow_version,
        status=row.status,
        version=row.version,
        attention=row.attention,
        as_of=now,
        waiting_on=tuple(waiting_on),
        allowed_actions=tuple(
            _allowed_actions(
                row.status, steps, _replay_refusals(row, steps), _dependency_unmet(row, place)
            )
        ),
        steps=tuple(
            {
                "id": step["id"],
                "name": step["name"],
                "kind": step["kind"],
                "status": step["status"],
                **attempt_in_round(
                    step["attempt"], step["max_attempts"], step["round_attempts_before"]
                )._asdict(),
                "iteration": step["iteration"],
                "failure_class": step["failure_class"] or None,
                "last_failure": _last_failure(step),
                **_telemetry(step),
            }
            for step in steps
        ),
        flow=place,
        deadline=row.deadline,
        loops=tuple(_loops(reading, steps)),
    )


# One function per query, each for the whole run: see QUERIES.


def _run_row(run_id: UUID | str, now: datetime) -> _ExplainedRun:
    """The run with its attention class and, when paused, who paused it and when."""
    last_pause = Event.objects.filter(run_id=OuterRef("pk"), type=PAUSE_EVENT).order_by("-id")
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
            # Likewise counted for a queued run only: the queued runs of its workflow
            # that start before it (highest priority first, oldest first).
            queued_ahead=Case(
                When(status=RunStatus.QUEUED, then=Subquery(_queued_ahead())),
                output_field=IntegerField(),
            ),
        ),
    )
    return cast("_ExplainedRun", row)


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


def _live_workers(now: datetime) -> list[tuple[frozenset[str], frozenset[str]]]:
    """What each live worker serves: its queues and its capabilities."""
    return [
        (frozenset(queues), frozenset(capabilities))
        for queues, capabilities in live_workers(now).values_list("queues", "capabilities")
    ]


def _held_slots(ready: list[_Unit]) -> dict[str, int]:
    """How many slots are held under each concurrency limit ready work waits on: one
    query per limit, for the first :data:`CONCURRENCY_KEYS_COUNTED` of them."""
    keys = sorted(
        {
            unit.held_on.removeprefix(CONCURRENCY)
            for unit in ready
            if unit.held_on.startswith(CONCURRENCY)
        }
    )
    return {key: slots.held(key) for key in keys[:CONCURRENCY_KEYS_COUNTED]}


def _steps(run_id: UUID, now: datetime) -> list[dict[str, Any]]:
    """Every step, without its output (a fan-out's holds every item's)."""
    return list(
        Step.objects.filter(run_id=run_id)
        .order_by("id")
        .annotate(
            step_id=F("id"),
            lease_expired=_flag(expired_lease(now)),
            undispatched=_flag(undispatched_unit(STEP, now)),
        )
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
            *_UNIT_FIELDS,
            *STEP_TELEMETRY_FIELDS,
        )
    )


def _telemetry(step: Mapping[str, Any]) -> dict[str, Any]:
    """A step's telemetry as JSON-ready data (the time as ISO 8601), read with the step's
    row at no extra query."""
    reported = {name: step[name] for name in STEP_TELEMETRY_FIELDS}
    if reported["progress_at"] is not None:
        reported["progress_at"] = reported["progress_at"].isoformat()
    return reported


# A step in one of these statuses with a failure class: its last attempt failed (it
# waits for a retry or an operator, or failed for good).
_AFTER_A_FAILED_ATTEMPT = (StepStatus.FAILED, StepStatus.RETRY_SCHEDULED, StepStatus.READY)


def _last_failure(step: dict[str, Any]) -> str | None:
    """``"last attempt failed: timeout"`` when the step's last attempt failed, in words."""
    if step["failure_class"] and step["status"] in _AFTER_A_FAILED_ATTEMPT:
        return f"last attempt failed: {step['failure_class']}"
    return None


def _scheduled_timers(run_id: UUID, now: datetime) -> list[dict[str, Any]]:
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


def _item_counts(run_id: UUID) -> dict[tuple[int, str], int]:
    """How many items of each fan-out of the run are in each status: one grouped query."""
    return {
        (count["step_id"], count["status"]): count["items"]
        for count in FanOutItem.objects.filter(step__run_id=run_id)
        .values("step_id", "status")
        .annotate(items=Count("id"))
        .order_by()
    }


def _items_in_hand(run_id: UUID, now: datetime) -> list[dict[str, Any]]:
    """Ready and running items: at most ``max_parallel`` per fan-out, whatever its size."""
    return list(
        FanOutItem.objects.filter(step__run_id=run_id, status__in=_ITEMS_IN_HAND)
        .order_by("step_id", "index")
        .annotate(
            item_key=F("key"),
            lease_expired=_flag(expired_lease(now)),
            undispatched=_flag(undispatched_unit(ITEM, now)),
        )
        .values("step_id", "item_key", "lease_expired", "undispatched", *_UNIT_FIELDS)
    )


def _compensations_in_hand(run_id: UUID, now: datetime) -> list[dict[str, Any]]:
    """Compensations started and not finished, newest first (the order they run in)."""
    return list(
        CompensationRecord.objects.filter(run_id=run_id, status__in=_COMPENSATIONS_IN_HAND)
        .order_by("-sequence")
        .annotate(
            item_key=F("item__key"),
            lease_expired=_flag(expired_lease(now)),
            undispatched=_flag(undispatched_unit(COMPENSATION, now)),
        )
        .values(
            "step_id",
            "item_key",
            "sequence",
            "handler",
            "lease_expired",
            "undispatched",
            *_UNIT_FIELDS,
        )
    )


def _live_children(run_id: UUID) -> list[Mapping[str, Any]]:
    """Child runs not yet final: of ``SubWorkflow`` steps and of fan-out items."""
    return list(
        Run.objects.filter(parent_run_id=run_id)
        .exclude(status__in=RUN_FINAL)
        .order_by("created_at", "id")
        .values("id", "workflow_name", "status", "parent_step_id", "parent_item__key")
    )


def _flow_place(run: Run) -> FlowPlace:
    """The member's place in its flow (:data:`FLOW_QUERIES`). Its member row commits
    with the run, and goes with it."""
    member = (
        FlowMember.objects.filter(run_id=run.pk)
        .values(
            "id",
            "name",
            "join",
            "join_count",
            "flow_id",
            "flow__name",
            "flow__status",
            "flow__revision",
        )
        .get()
    )
    rule = JoinRule.stored(member["join"], member["join_count"])
    upstream = tuple(
        {"member": name, "run": str(run_id), "status": status}
        for name, run_id, status in FlowEdge.objects.filter(downstream_id=member["id"])
        .order_by("id")
        .values_list("upstream__name", "upstream__run_id", "upstream__run__status")
    )
    # A member cancelled when its flow closed on a join that can never be satisfied
    # names no upstream member: its error's message says so.
    error = run.error if isinstance(run.error, dict) else {}
    failed = (
        {"member": error["upstream"], "status": error.get("upstream_status", "")}
        if error.get("code") == DEPENDENCY_FAILED and error.get("upstream")
        else None
    )
    return FlowPlace(
        flow=member["flow_id"],
        flow_name=member["flow__name"],
        flow_status=member["flow__status"],
        revision=member["flow__revision"],
        member=member["name"],
        join=rule.spec,
        join_words=rule.describe(),
        upstream=upstream,
        failed_upstream=failed,
    )


def _flag(condition: Q) -> Case:
    """``condition`` as a column that is never NULL (a NULL lease compares as unknown)."""
    return Case(
        When(condition, then=Value(True)), default=Value(False), output_field=BooleanField()
    )


class _Reading:
    """What the queries returned, indexed the ways the entries look things up."""

    def __init__(
        self,
        run: Run,
        steps: list[dict[str, Any]],
        timers: list[dict[str, Any]],
        item_counts: dict[tuple[int, str], int],
    ) -> None:
        self.step_names = {step["id"]: step["name"] for step in steps}
        self.item_counts = item_counts
        self.timeouts = {
            (timer["step_id"], timer["kind"]): timer["due_at"]
            for timer in timers
            if timer["kind"] != TimerKind.RETRY
        }
        self.releases = {
            (timer["step_id"], timer["item__key"]): timer["due_at"]
            for timer in timers
            if timer["kind"] == TimerKind.RELEASE
        }
        self.workflow = _registered(run)
        self.snapshot_steps = {
            step.get("name"): step for step in (run.snapshot or {}).get("steps", [])
        }
        # Filled by explain() when it read them: what live workers serve (None: not
        # read, the work does not go to workers), and held slots per concurrency key.
        self.workers: list[tuple[frozenset[str], frozenset[str]]] | None = None
        self.held_slots: dict[str, int] = {}

    def served(self, route: Route) -> bool:
        """Whether a live worker serves ``route`` (or workers were not asked about)."""
        return self.workers is None or any(
            route.served_by(queues, capabilities) for queues, capabilities in self.workers
        )

    def node(self, step_id: int) -> LeasedNode | None:
        workflow, name = self.workflow, self.step_names.get(step_id)
        node = workflow.nodes.get(name) if workflow is not None and name else None
        return node if isinstance(node, LeasedNode) else None

    def described(self, name: str) -> Mapping[str, Any]:
        """The step's node as the run's registered definition describes it, else as the
        run's snapshot recorded it, else nothing known."""
        if self.workflow is not None and name in self.workflow.nodes:
            return self.workflow.nodes[name].describe()
        return self.snapshot_steps.get(name, {})


def _registered(run: Run) -> type[Workflow] | None:
    try:
        return registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing:
        return None


def _unit(kind: WorkKind, row: dict[str, Any], *, item: str | None) -> _Unit:
    values = {name: row[name] for name in (*_UNIT_FIELDS, "lease_expired", "undispatched")}
    # A step's attempts numbered within its round, as every surface shows them (items
    # and compensations have no rounds).
    values["attempt"], values["max_attempts"] = attempt_in_round(
        row["attempt"], row["max_attempts"], row.get("round_attempts_before", 0)
    )
    return _Unit(kind=kind, step_id=row["step_id"], item=item, **values)


def _paused(run: _ExplainedRun) -> list[WaitingOn]:
    if run.status != RunStatus.PAUSED:
        return []
    details = {"reason": run.paused_reason, "by": run.paused_by, "at": run.paused_at}
    return [WaitingOn("paused", None, details)]


def _queued(run: _ExplainedRun) -> list[WaitingOn]:
    """A run waiting for a place under its workflow's ``max_concurrent_runs``."""
    if run.status != RunStatus.QUEUED:
        return []
    limit = _max_concurrent_runs(run)
    ahead = run.queued_ahead or 0
    runs = "run" if ahead == 1 else "runs"
    limit_text = f" (max_concurrent_runs {limit})" if limit is not None else ""
    return [
        WaitingOn(
            "queued",
            None,
            {
                "workflow": run.workflow_name,
                "ahead": ahead,
                "max_concurrent_runs": limit,
                "message": (
                    f"queued behind {ahead} earlier {runs} of workflow "
                    f"{run.workflow_name}{limit_text}"
                ),
            },
        )
    ]


def _blocked(run: Run, place: FlowPlace | None) -> list[WaitingOn]:
    """A flow member waiting for its upstream members under its join. One whose join is
    decided already (an upstream's end not yet settled by a process that died) says so:
    the ``repair_flows`` scanner starts or cancels it on its next pass."""
    if run.status != RunStatus.BLOCKED or place is None:
        return []
    statuses = [entry["status"] for entry in place.upstream]
    rule = JoinRule.parse(place.join)
    verdict = rule.verdict(statuses, more_may_come=place.flow_status == FlowStatus.OPEN)
    completed = statuses.count(RunStatus.COMPLETED)
    pending = [entry for entry in place.upstream if entry["status"] not in RUN_FINAL]
    message = (
        f"member {place.member!r} of flow {place.flow_name!r} waits until "
        f"{place.join_words}: {completed} of {len(statuses)} completed"
    )
    if pending:
        waits = ", ".join(f"{entry['member']} ({entry['status']})" for entry in pending)
        message += f"; waiting on {waits}"
    if verdict is not Verdict.WAITING:
        message += f"; its join is {_DECIDED[verdict]}"
    return [
        WaitingOn(
            "flow",
            None,
            {
                "flow": str(place.flow),
                "flow_name": place.flow_name,
                "member": place.member,
                "join": place.join,
                "join_words": place.join_words,
                "upstream": [dict(entry) for entry in place.upstream],
                "completed": completed,
                "waiting_for": [entry["member"] for entry in pending],
                "verdict": verdict.value,
                "message": message,
            },
        )
    ]


# What a blocked member's explanation adds when its join is decided but it still waits.
_DECIDED = {
    Verdict.SATISFIED: "satisfied: the repair_flows scanner starts it on its next pass",
    Verdict.IMPOSSIBLE: (
        "no longer satisfiable: the repair_flows scanner cancels it (dependency_failed) on "
        "its next pass"
    ),
}


def _max_concurrent_runs(run: Run) -> int | None:
    """The latest registered version's limit (the one admission applies), else the
    run's snapshot's."""
    try:
        return registry.latest(run.workflow_name).max_concurrent_runs
    except DefinitionMissing:
        return (run.snapshot or {}).get("max_concurrent_runs")


def _gate(reading: _Reading, step: dict[str, Any]) -> WaitingOn | None:
    if step["status"] != StepStatus.WAITING:
        return None
    assignees = step["assignees"] or {}
    return WaitingOn(
        "gate",
        step["name"],
        {
            "step_id": step["id"],
            "prompt": step["prompt"],
            "users": assignees.get("users", []),
            "groups": assignees.get("groups", []),
            "permission": step["permission"] or None,
            "due_at": reading.timeouts.get((step["id"], TimerKind.GATE_TIMEOUT)),
            "on_timeout": reading.described(step["name"]).get("on_timeout"),
            "claimed_by": step["claimed_by__username"],
            "claimed_at": step["claimed_at"],
        },
    )


def _signal(reading: _Reading, step: dict[str, Any]) -> WaitingOn | None:
    if step["status"] != StepStatus.WAITING:
        return None
    return WaitingOn(
        "signal",
        step["name"],
        {
            "name": step["signal_name"],
            "due_at": reading.timeouts.get((step["id"], TimerKind.SIGNAL_TIMEOUT)),
        },
    )


def _callback(reading: _Reading, step: dict[str, Any]) -> WaitingOn | None:
    """A waiting task waits for a callback (its handler returned
    ``ctx.await_callback()``), or, a poll between two iterations, for its next poll."""
    if step["status"] != StepStatus.WAITING:
        return None
    next_poll = reading.timeouts.get((step["id"], TimerKind.REPEAT))
    if next_poll is not None:
        return _poll(reading, step, next_poll)
    return WaitingOn(
        "callback",
        step["name"],
        {
            "attempt": step["attempt"] - step["round_attempts_before"],
            "expires_at": reading.timeouts.get((step["id"], TimerKind.CALLBACK_TIMEOUT)),
        },
    )


def _poll(reading: _Reading, step: dict[str, Any], due_at: datetime) -> WaitingOn:
    most = reading.described(step["name"]).get("max_iterations")
    bound = f" of at most {most}" if most is not None else ""
    return WaitingOn(
        "poll",
        step["name"],
        {
            "iteration": step["iteration"],
            "max_iterations": most,
            "due_at": due_at,
            "message": f"waiting for its next poll (iteration {step['iteration']}{bound})",
        },
    )


def _fanout(reading: _Reading, step: dict[str, Any]) -> WaitingOn | None:
    """Done and failed come from the step's counters, which change in the transaction
    of each item; running and pending from the one grouped count of item statuses."""
    if step["items_total"] == 0:
        return None
    counted = Counter(
        {status: reading.item_counts.get((step["id"], status), 0) for status in StepStatus}
    )
    node = reading.workflow.nodes.get(step["name"]) if reading.workflow else None
    tolerance_left = (
        node.allowed_failures(step["items_total"]) - step["items_failed"]
        if isinstance(node, FanOut)
        else None
    )
    return WaitingOn(
        "fanout",
        step["name"],
        {
            "total": step["items_total"],
            "done": step["items_completed"],
            "failed": step["items_failed"],
            "skipped": step["items_skipped"],
            "running": counted[StepStatus.RUNNING] + counted[StepStatus.WAITING],
            "pending": counted[StepStatus.PENDING]
            + counted[StepStatus.READY]
            + counted[StepStatus.RETRY_SCHEDULED],
            "tolerance_left": tolerance_left,
        },
    )


# What holds a run at a step that is not final, by the step's kind. A sleep holds it
# by its timer and a sub-workflow by its child run, listed as such.
_STEP_HOLDS: dict[str, Callable[[_Reading, dict[str, Any]], WaitingOn | None]] = {
    Gate.kind: _gate,
    WaitForSignal.kind: _signal,
    Task.kind: _callback,
    FanOut.kind: _fanout,
}


def _child(reading: _Reading, child: Mapping[str, Any]) -> WaitingOn:
    return WaitingOn(
        "child",
        reading.step_names.get(child["parent_step_id"]),
        {
            "run": str(child["id"]),
            "workflow": child["workflow_name"],
            "status": child["status"],
            "item": child["parent_item__key"],
        },
    )


def _compensation(reading: _Reading, record: dict[str, Any]) -> WaitingOn:
    return WaitingOn(
        "compensation",
        reading.step_names.get(record["step_id"]),
        {
            "sequence": record["sequence"],
            "handler": record["handler"],
            "status": record["status"],
            "attempt": record["attempt"],
            "item": record["item_key"],
        },
    )


def _timer(reading: _Reading, timer: dict[str, Any]) -> WaitingOn:
    step_id = timer["step_id"] or timer["compensation__step_id"]
    return WaitingOn(
        "timer",
        reading.step_names.get(step_id),
        {
            "fires": timer["kind"],
            "due_at": timer["due_at"],
            "overdue": timer["overdue"],
            "item": timer["item__key"],
            "compensation": timer["compensation__sequence"],
        },
    )


def _lease(reading: _Reading, unit: _Unit) -> WaitingOn:
    return WaitingOn(
        "lease",
        reading.step_names.get(unit.step_id),
        {
            "unit": unit.kind.name,
            "item": unit.item,
            "worker": unit.lease_owner,
            "expires_at": unit.lease_expires_at,
            "expired": unit.lease_expired,
            "attempt": unit.attempt,
            "max_attempts": unit.max_attempts,
        },
    )


def _ready(reading: _Reading, unit: _Unit) -> WaitingOn:
    """Why ready work has not started, most specific first: no live worker may run it,
    a limit holds it, or it waits for a worker to pick it up."""
    if not reading.served(unit.route):
        return _worker(reading, unit)
    for prefix, hold in _HELD.items():
        if unit.held_on.startswith(prefix):
            return hold(reading, unit, unit.held_on.removeprefix(prefix))
    return _dispatch(reading, unit)


def _unit_details(unit: _Unit) -> dict[str, Any]:
    return {"unit": unit.kind.name, "item": unit.item, "since": unit.updated_at}


def _worker(reading: _Reading, unit: _Unit) -> WaitingOn:
    route = unit.route
    return WaitingOn(
        "worker",
        reading.step_names.get(unit.step_id),
        {
            **_unit_details(unit),
            "queue": route.queue,
            "requires": sorted(route.requires),
            "message": f"waiting for a worker of queue {route.queue!r}"
            + _capabilities(route.requires),
        },
    )


def _capabilities(names: Iterable[str]) -> str:
    names = sorted(names)
    if not names:
        return ""
    return f" with capabilit{'y' if len(names) == 1 else 'ies'} {', '.join(names)}"


def _concurrency(reading: _Reading, unit: _Unit, key: str) -> WaitingOn:
    node = reading.node(unit.step_id)
    limit = node.max_concurrent if node is not None else None
    held = reading.held_slots.get(key)
    counted = f" ({held} of {limit} held)" if held is not None and limit is not None else ""
    return WaitingOn(
        "concurrency",
        reading.step_names.get(unit.step_id),
        {
            **_unit_details(unit),
            "key": key,
            "limit": limit,
            "held": held,
            "message": f"waiting for a free place under concurrency limit {key}{counted}",
        },
    )


def _rate(reading: _Reading, unit: _Unit, key: str) -> WaitingOn:
    return WaitingOn(
        "rate",
        reading.step_names.get(unit.step_id),
        {
            **_unit_details(unit),
            "key": key,
            "limit": _rate_limit(reading, unit, key),
            "due_at": reading.releases.get((unit.step_id, unit.item)),
            "message": f"delayed by rate limit {key}",
        },
    )


def _rate_limit(reading: _Reading, unit: _Unit, key: str) -> str | None:
    """The limit behind rate key ``task:<workflow>.<step>`` or ``queue:<name>``."""
    if key.startswith("queue:"):
        return workflow_settings.QUEUE_RATE_LIMITS.get(key.removeprefix("queue:"))
    node = reading.node(unit.step_id)
    return node.rate_limit if node is not None else None


def _budget(reading: _Reading, unit: _Unit, dimension: str) -> WaitingOn:
    return WaitingOn(
        "budget",
        reading.step_names.get(unit.step_id),
        {
            **_unit_details(unit),
            "dimension": dimension,
            "message": f"held: budget {dimension} exhausted",
        },
    )


# What a ready unit's ``held_on`` says holds it, by its prefix.
_HELD: dict[str, Callable[[_Reading, _Unit, str], WaitingOn]] = {
    CONCURRENCY: _concurrency,
    RATE: _rate,
    BUDGET: _budget,
}


def _dispatch(reading: _Reading, unit: _Unit) -> WaitingOn:
    return WaitingOn(
        "dispatch",
        reading.step_names.get(unit.step_id),
        {
            "unit": unit.kind.name,
            "item": unit.item,
            "since": unit.updated_at,
            "undispatched": unit.undispatched,
        },
    )


def _loops(reading: _Reading, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where each loop node and polling task stands, from the registered definition
    (none without one) and the step rows: ``kind`` (``loop`` or ``poll``), ``loop``
    (its step), ``status``, ``back_to`` and ``body`` (a poll's are itself),
    ``iteration`` (a loop node's: the round its body is in; a poll's: its iteration),
    ``max_iterations``, ``on_exhausted``, ``every_seconds`` and ``next_poll_at`` (a
    poll's pause and its scheduled ``repeat`` timer; ``None`` for a loop node), and
    ``ends_when``, in words."""
    workflow = reading.workflow
    if workflow is None:
        return []
    rows = {step["name"]: step for step in steps}
    entries = []
    for name, node in workflow.nodes.items():
        row = rows.get(name)
        if row is None:
            continue
        if isinstance(node, Loop):
            reached_after = " and ".join(workflow.graph.upstream[name]) or name
            entries.append(
                _loop_entry(
                    "loop",
                    row,
                    node.back_to,
                    workflow.graph.loop_bodies[name],
                    node.max_iterations,
                    node.on_exhausted,
                    f"while_ is false after {reached_after}",
                )
            )
        elif isinstance(node, Task) and node.repeat_until is not None:
            entry = _loop_entry(
                "poll",
                row,
                name,
                (name,),
                node.max_iterations,
                node.on_exhausted,
                "repeat_until is true after an iteration",
            )
            entry["every_seconds"] = node.every.total_seconds() if node.every else 0.0
            entry["next_poll_at"] = reading.timeouts.get((row["id"], TimerKind.REPEAT))
            entries.append(entry)
    return entries


def _loop_entry(
    kind: str,
    row: dict[str, Any],
    back_to: str,
    body: Iterable[str],
    max_iterations: int | None,
    on_exhausted: str,
    condition: str,
) -> dict[str, Any]:
    bound = f", or after {max_iterations} iterations (then {on_exhausted})"
    return {
        "kind": kind,
        "loop": row["name"],
        "status": row["status"],
        "back_to": back_to,
        "body": list(body),
        "iteration": row["iteration"],
        "max_iterations": max_iterations,
        "on_exhausted": on_exhausted,
        "every_seconds": None,
        "next_poll_at": None,
        "ends_when": condition + (bound if max_iterations is not None else ""),
    }


@dataclass(frozen=True)
class _ReplayRefusals:
    """Why the replay verbs of an ended run may not, beyond its status: the retry's
    reason, and each step a rerun may not start from with its reason."""

    retry: str | None
    rerun: Mapping[str, str]


def _replay_refusals(run: Run, steps: list[dict[str, Any]]) -> _ReplayRefusals | None:
    """What became of an ended run's completed work says about replaying it: one query,
    for a workflow that declares compensations (else nothing can refuse)."""
    workflow = _registered(run) if run.status in RETRY.accepts | RERUN.accepts else None
    if workflow is None or not any(
        getattr(node, "compensate_path", "") for node in workflow.nodes.values()
    ):
        return None
    facts = facts_of(run.pk, ((s["id"], s["name"], s["status"], s["generation"]) for s in steps))
    if set(facts) != set(workflow.nodes):
        return None  # steps out of line with the definition: the verbs will say
    retry = None
    if run.status in RETRY.accepts and run.status != RunStatus.COMPENSATION_FAILED:
        attempts = {step["name"]: step["attempt"] for step in steps}
        retry = retry_plan(workflow.graph, facts, attempts).refusal
    rerun: dict[str, str] = {}
    if run.status in RERUN.accepts:
        for name in workflow.nodes:
            reason = rerun_compensation_refusal(name, downstream_of(workflow.graph, [name]), facts)
            if reason is not None:
                rerun[name] = reason
    return _ReplayRefusals(retry, rerun)


def _dependency_unmet(run: Run, place: FlowPlace | None) -> str | None:
    """Why a member cancelled with ``dependency_failed`` may not be retried or rerun
    (the verbs' :class:`~workflows.errors.DependencyUnmet`); ``None`` for any other run.
    Read from the member's place, which holds its upstreams' statuses already."""
    if place is None or not cancelled_for_dependency(run.status, run.error):
        return None
    return unmet_reason(
        JoinRule.parse(place.join),
        [(up["member"], up["status"]) for up in place.upstream],
        more_may_come=place.flow_status == FlowStatus.OPEN,
    )


def _allowed_actions(
    run_status: str,
    steps: list[dict[str, Any]],
    replay: _ReplayRefusals | None = None,
    unmet: str | None = None,
) -> list[Action]:
    """Every run verb; each step verb for the steps in a status it accepts; a ``rerun``
    refused from a step for what became of the run's work; the decisions of waiting
    gates. In that order, steps in their order. ``unmet``: why a member a failed
    dependency cancelled may not be retried or rerun."""
    actions = [
        _action(
            verb.name,
            verb.summary,
            verb.refusal(run_status)
            or (unmet if verb in (RETRY, RERUN) else None)
            or (replay.retry if replay is not None and verb is RETRY else None),
        )
        for verb in RUN_VERBS.values()
    ]
    for step in steps:
        for verb in STEP_VERBS.values():
            if step["status"] in verb.accepts:
                reason = verb.refusal(step["status"], run_status)
                actions.append(_action(verb.name, verb.summary, reason, step))
        if replay is not None and step["name"] in replay.rerun:
            actions.append(_action(RERUN.name, RERUN.summary, replay.rerun[step["name"]], step))
        if step["kind"] == Gate.kind and step["status"] == StepStatus.WAITING:
            actions.append(_action("approve", "approve the gate", None, step))
            actions.append(_action("reject", "reject the gate", None, step))
    return actions


def _action(
    verb: str, summary: str, reason: str | None, step: dict[str, Any] | None = None
) -> Action:
    return Action(
        verb=verb,
        allowed=reason is None,
        reason=reason,
        summary=summary,
        step=step["name"] if step else None,
        step_id=step["id"] if step else None,
    )


def _json_ready(value: Any) -> Any:
    """Times as ISO 8601 strings, recursively; everything else is JSON already."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(item) for item in value]
    return value
