"""What is everything waiting for? Every wait across runs, oldest first, in a fixed
number of queries.

``explain(run)`` answers the question for one run; :func:`pending_waits` answers it for
all of them, for an operator's morning look or an outside system's dashboard. A wait's
``kind`` is a :class:`~workflows.holds.HoldKind`, one of those the table marks
``listed`` (:data:`WAIT_KINDS`), named as ``explain`` names them:

- ``gate``: a gate waiting for a decision (what it waits for: its prompt);
- ``signal``: a ``WaitForSignal`` step (the signal's name);
- ``callback``: a task parked on ``ctx.await_callback()`` (``"callback"``);
- ``await``: a task whose handler returned ``Await(...)`` (the signal names it awaits,
  comma-separated; ``details``: ``signals``, the list);
- ``sleep``: a ``Sleep`` step (``"timer"``, its due time is the wake-up);
- ``poll``: a polling task (``Task(repeat_until=...)``) between two iterations
  (``"next poll"``, its ``repeat`` timer's due time is the next one; ``details``: the
  iteration it will run);
- ``child``: a ``SubWorkflow`` step waiting for its child run (the child's id);
- ``concurrency``, ``rate``, ``budget``: ready work (a step or a fan-out item) that a
  worker found held by that limit (its ``held_on``: ``concurrency:<key>``,
  ``rate:<key>``, ``budget:<dimension>``);
- ``blocked``: a flow member waiting for its upstream members under its join;
- ``queued``: a run waiting for a place under its workflow's ``max_concurrent_runs``.

Left out on purpose: work that is merely ready or running (workers are on it; ``explain``
says why one has not started), and a fan-out's items waiting for their child runs (each
child run's own waits are listed). Nothing of a run that stopped is there either:
stopping a run cancels its waiting and ready steps in the same transaction, so no
run-status condition is needed (and a wait of an ended run, were there one, would show
with its run's status rather than hide).

Each wait says since when (``since``, and ``age`` from ``now``) and its timeout
(``due_at``: the timer that ends the wait, if any, e.g. a gate's timeout or a rate
limit's release), with the run's id, workflow, business key, status and deadline.

Cost: one query per source, five at most whatever the number of runs — waiting steps
(the partial index ``workflows_step_waiting``), held steps and held items (the partial
indexes of ready work), queued runs and blocked runs (the status index, one status
each so that the index gives the order); a ``kind`` filter leaves out the sources it
does not need. Each source is a keyset read in its index's order that stops at
``limit + 1`` rows after the cursor; the merge keeps the oldest. Timeouts are
correlated subqueries on the timers' step or item foreign key.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import reduce
from itertools import islice
from operator import or_
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.core import signing
from django.db import connections, models, router
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from workflows.errors import InvalidInput
from workflows.holds import LIMIT_KINDS, HoldKind, held_marker, listed_kinds
from workflows.models import FanOutItem, Run, Step, Timer
from workflows.status import NodeKind, RunStatus, StepStatus, TimerKind, TimerStatus
from workflows.validation import check_text

__all__ = ["MAX_LIMIT", "WAIT_CHOICES", "WAIT_KINDS", "Wait", "WaitPage", "pending_waits"]

# The most waits one page may hold.
MAX_LIMIT = 500
_CURSOR_SALT = "workflows.queries.waits.cursor"


# What ``pending_waits`` lists: the kinds of the :data:`~workflows.holds.HOLDS` table
# marked ``listed``; ``kind=`` filters on their values.
WAIT_KINDS = listed_kinds()
WAIT_CHOICES = [(kind.value, kind.label) for kind in WAIT_KINDS]
_LIMITS = {kind.value: kind for kind in LIMIT_KINDS}


# The wait of a waiting step, by the step's kind, and the timers that end each. A
# waiting task is a poll when its ``repeat`` timer is scheduled, an await when its
# ``awaiting`` is set, else a callback.
_STEP_WAITS: dict[str, HoldKind] = {
    NodeKind.GATE: HoldKind.GATE,
    NodeKind.SIGNAL: HoldKind.SIGNAL,
    NodeKind.TASK: HoldKind.CALLBACK,
    NodeKind.SLEEP: HoldKind.SLEEP,
    NodeKind.SUBWORKFLOW: HoldKind.CHILD,
}
_TASK_WAITS = {
    HoldKind.CALLBACK: Q(polling=False, awaiting__isnull=True),
    HoldKind.AWAIT: Q(polling=False, awaiting__isnull=False),
    HoldKind.POLL: Q(polling=True),
}
_STEP_TIMERS = (
    TimerKind.GATE_TIMEOUT,
    TimerKind.SIGNAL_TIMEOUT,
    TimerKind.CALLBACK_TIMEOUT,
    TimerKind.AWAIT_TIMEOUT,
    TimerKind.SLEEP,
    TimerKind.REPEAT,
)
_RUN_WAITS = {RunStatus.BLOCKED: HoldKind.BLOCKED, RunStatus.QUEUED: HoldKind.QUEUED}


@dataclass(frozen=True)
class Wait:
    """One wait: what waits (run, step, item), for what, since when, until when.

    ``waits_for`` is the short answer (a gate's prompt, a signal's name, a limit's key,
    ...); ``details`` holds the rest by kind (``attempt``, ``claimed_by``, ``flow``,
    ``join``, ...). ``due_at`` is when the timer ending the wait fires (``None``: no
    timer); ``deadline`` the run's own.
    """

    kind: str
    run: UUID
    workflow: str
    business_key: str
    run_status: str
    step: str | None
    step_id: int | None
    item: str | None
    waits_for: str
    since: datetime
    age: timedelta
    due_at: datetime | None
    deadline: datetime | None
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (ids and times as strings, the age in seconds)."""
        return {
            "kind": self.kind,
            "run": str(self.run),
            "workflow": self.workflow,
            "business_key": self.business_key,
            "run_status": self.run_status,
            "step": self.step,
            "step_id": self.step_id,
            "item": self.item,
            "waits_for": self.waits_for,
            "since": self.since.isoformat(),
            "age_seconds": self.age.total_seconds(),
            "due_at": self.due_at.isoformat() if self.due_at else None,
            "deadline": self.deadline.isoformat() if self.deadline else None,
            "details": self.details,
        }


@dataclass(frozen=True)
class WaitPage:
    """A page of waits, oldest first; ``next_cursor`` continues it (``None``: the end)."""

    waits: list[Wait]
    next_cursor: str | None

    def __iter__(self) -> Iterator[Wait]:
        return iter(self.waits)

    def __len__(self) -> int:
        return len(self.waits)


@dataclass(frozen=True)
class _Position:
    """Where a page ends: the order is (since, source, id)."""

    since: datetime
    source: int
    id: str


@dataclass(frozen=True)
class _Filters:
    kinds: frozenset[HoldKind]
    workflow: str | None
    cutoff: datetime | None
    after: _Position | None
    limit: int


def pending_waits(
    *,
    kind: str | Iterable[str] | None = None,
    workflow: str | None = None,
    older_than: timedelta | None = None,
    limit: int = 100,
    cursor: str | None = None,
    now: datetime | None = None,
) -> WaitPage:
    """Every wait across runs, oldest first, a page of at most ``limit`` (1 to 500).

    ``kind`` keeps one kind (or several) of :class:`HoldKind`; ``workflow`` the runs of
    one workflow (by name); ``older_than`` the waits that began at least that long
    before ``now``; ``cursor`` (a page's ``next_cursor``) starts after the page it
    ended. A value none of these accepts is :class:`InvalidInput`, before any query.
    """
    now = now or timezone.now()
    filters = _Filters(
        kinds=_kinds(kind),
        workflow=_workflow(workflow),
        cutoff=_cutoff(older_than, now),
        after=_read_cursor(cursor),
        limit=_limit(limit),
    )
    # Each source yields (since, its rank, id, wait) in that order, a total order: the
    # merge never compares two waits.
    streams = [
        read(filters, rank, now)
        for rank, (kinds, read) in enumerate(_SOURCES)
        if filters.kinds & kinds
    ]
    page = list(islice(heapq.merge(*streams), filters.limit + 1))
    if len(page) <= filters.limit:
        return WaitPage([wait for *_, wait in page], None)
    since, rank, pk, _ = page[filters.limit - 1]
    next_cursor = _issue_cursor(_Position(since, rank, str(pk)))
    return WaitPage([wait for *_, wait in page[: filters.limit]], next_cursor)


def _typed_id(position: _Position) -> Any:
    return UUID(position.id) if position.source in _RUN_SOURCES else int(position.id)


def _kinds(kind: str | Iterable[str] | None) -> frozenset[HoldKind]:
    if kind is None:
        return frozenset(WAIT_KINDS)
    names = [kind] if isinstance(kind, str) else list(kind)
    unknown = [name for name in names if name not in WAIT_KINDS]
    if unknown or not names:
        raise InvalidInput(
            f"kind must be one or more of {', '.join(WAIT_KINDS)}; got {unknown or names!r}",
            field="kind",
        )
    return frozenset(HoldKind(name) for name in names)


def _workflow(workflow: str | None) -> str | None:
    """A name the database can compare (no NUL, no lone surrogate), or ``None``."""
    if workflow is None:
        return None
    try:
        return check_text(workflow, field="workflow")
    except InvalidInput as exc:
        raise InvalidInput(exc.message, field="workflow") from None


def _cutoff(older_than: timedelta | None, now: datetime) -> datetime | None:
    if older_than is None:
        return None
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise InvalidInput("older_than must be a timedelta of zero or more", field="older_than")
    try:
        return now - older_than
    except OverflowError:
        raise InvalidInput("older_than reaches before year 1", field="older_than") from None


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_LIMIT}", field="limit")
    return limit


def _read_cursor(cursor: str | None) -> _Position | None:
    """A cursor is signed: one this function did not issue is refused, never queried."""
    if cursor is None:
        return None
    try:
        since, source, pk = signing.loads(cursor, salt=_CURSOR_SALT)
        moment = parse_datetime(since)
        if moment is None or not (0 <= source < len(_SOURCES)):
            raise ValueError(since)
        position = _Position(moment, source, str(pk))
        _typed_id(position)
        return position
    except (signing.BadSignature, TypeError, ValueError, UnicodeError):
        raise InvalidInput(
            "cursor is not one pending_waits issued; pass a page's next_cursor as given",
            field="cursor",
        ) from None


def _issue_cursor(position: _Position) -> str:
    return signing.dumps(
        [position.since.isoformat(), position.source, position.id], salt=_CURSOR_SALT
    )


def _window(
    rows: QuerySet[Any, Any], filters: _Filters, rank: int, since: str, pk: Callable[[str], Any]
) -> QuerySet[Any, Any]:
    """``rows`` old enough for ``older_than`` and after the cursor, in the order (since,
    source, id): a source before the cursor's starts strictly later, the cursor's own
    after its id, a later one at the same moment or later."""
    if filters.cutoff is not None:
        rows = rows.filter(**{f"{since}__lte": filters.cutoff})
    after = filters.after
    if after is None:
        return rows
    later, same = _moment_after(rows, since, after.since)
    if rank < after.source:
        return rows.filter(later)
    if rank > after.source:
        return rows.filter(later | same)
    return rows.filter(later | (same & Q(pk__gt=pk(after.id))))


def _moment_after(rows: QuerySet[Any, Any], since: str, moment: datetime) -> tuple[Q, Q]:
    """The conditions "``since`` is later than ``moment``" and "is ``moment``".

    SQLite stores a datetime as text, in the format of whoever wrote it: Django writes
    microseconds (and no fraction at all on a whole second), the database clock
    (``Now()``, the engine's ``db_now()``) milliseconds. One statement stamps many rows
    with one clock reading, so rows at the very moment a page ended are common, and the
    instant as Django renders it (``...42.123000``) equals no row written as
    ``...42.123``: the next page lost them. So on SQLite the moment is compared as text
    the index still serves: "later" against all six digits, which orders correctly
    against each format (a shorter text that is its prefix is not later, and is not
    later in time either); "is" against each way the instant may be written.
    """
    if connections[router.db_for_read(rows.model)].vendor != "sqlite":
        return Q(**{f"{since}__gt": moment}), Q(**{since: moment})
    naive = timezone.make_naive(moment, UTC) if timezone.is_aware(moment) else moment
    written = naive.strftime("%Y-%m-%d %H:%M:%S.%f")
    forms = [written]
    if naive.microsecond % 1000 == 0:
        forms.append(written[:-3])
    if naive.microsecond == 0:
        forms.append(written[:-7])
    text: models.CharField[str, str] = models.CharField()
    return (
        Q(**{f"{since}__gt": Value(written, output_field=text)}),
        Q(**{f"{since}__in": [Value(form, output_field=text) for form in forms]}),
    )


def _of_workflow(rows: QuerySet[Any], path: str, workflow: str | None) -> QuerySet[Any]:
    """``rows`` of runs of ``workflow`` (all of them for ``None``), read from the waits.

    The plan must start from the waits (a partial index, in the page's order, stopping
    at the limit), not from the runs of the workflow, which grow with the whole history.
    PostgreSQL's statistics know a workflow's runs are many and choose so; SQLite keeps
    none unless ``ANALYZE`` ran and would start from the runs' index, so there the name
    is compared through an expression no index serves. (PostgreSQL, given the
    expression, guesses its selectivity and may scan every run instead.)
    """
    if workflow is None:
        return rows
    if connections[router.db_for_read(rows.model)].vendor != "sqlite":
        return rows.filter(**{path: workflow})
    return rows.alias(of_workflow=Coalesce(F(path), Value(""))).filter(of_workflow=workflow)


# What a source yields: the wait's place in the order, then the wait.
_Entry = tuple[datetime, int, Any, Wait]
# A source: reads its waits after the cursor, given its rank and the time now.
_Source = Callable[[_Filters, int, datetime], Iterator[_Entry]]


def _wait(
    rank: int,
    row: dict[str, Any],
    now: datetime,
    *,
    kind: str,
    waits_for: str,
    step: str | None = None,
    step_id: int | None = None,
    item: str | None = None,
    due_at: datetime | None = None,
    details: dict[str, Any] | None = None,
) -> _Entry:
    since = row["of_since"]
    return (
        since,
        rank,
        row["id"],
        Wait(
            kind=str(kind),
            run=row["of_run"],
            workflow=row["of_workflow"],
            business_key=row["of_business_key"],
            run_status=row["of_run_status"],
            step=step,
            step_id=step_id,
            item=item,
            waits_for=waits_for,
            since=since,
            age=max(now - since, timedelta(0)),
            due_at=due_at,
            deadline=row["of_deadline"],
            details=details or {},
        ),
    )


def _page(
    rows: QuerySet[Any], filters: _Filters, since: str, run: str, *fields: str, **columns: Any
) -> QuerySet[Any, dict[str, Any]]:
    """``rows`` in the page's order (``since``, id), at most one more than a page, as
    dicts of ``id``, ``of_since``, ``fields``, ``columns`` and their run's (``of_run``,
    ``of_workflow``, ``of_business_key``, ``of_run_status``, ``of_deadline``), read
    through ``run``, the path from a row to its run (``""``: the row is the run)."""
    path = f"{run}__" if run else ""
    return (
        rows.annotate(
            of_since=F(since),
            of_run=F(f"{path}id"),
            of_workflow=F(f"{path}workflow_name"),
            of_business_key=F(f"{path}business_key"),
            of_run_status=F(f"{path}status"),
            of_deadline=F(f"{path}deadline"),
            **columns,
        )
        .order_by(since, "id")
        .values(
            "id",
            "of_since",
            *fields,
            *columns,
            "of_run",
            "of_workflow",
            "of_business_key",
            "of_run_status",
            "of_deadline",
        )[: filters.limit + 1]
    )


def _waiting_steps(filters: _Filters, rank: int, now: datetime) -> Iterator[_Entry]:
    """Gates, signals, callbacks, awaits, polls, sleeps and children: steps ``waiting``,
    one query."""
    task_waits = [wait for wait in _TASK_WAITS if wait in filters.kinds]
    step_kinds = [
        step
        for step, wait in _STEP_WAITS.items()
        if wait in filters.kinds or (step == NodeKind.TASK and task_waits)
    ]
    due = Timer.objects.filter(
        step_id=OuterRef("pk"), status=TimerStatus.SCHEDULED, kind__in=_STEP_TIMERS
    ).order_by("due_at")
    child = Run.objects.filter(parent_step_id=OuterRef("pk")).order_by("-created_at")
    rows = Step.objects.filter(status=StepStatus.WAITING).alias(
        polling=Exists(
            Timer.objects.filter(
                step_id=OuterRef("pk"), kind=TimerKind.REPEAT, status=TimerStatus.SCHEDULED
            )
        )
    )
    if len(step_kinds) < len(_STEP_WAITS):
        rows = rows.filter(kind__in=step_kinds)
    if task_waits and len(task_waits) < len(_TASK_WAITS):
        # Some of a task's waits: leave out the tasks waiting the other ways.
        rows = rows.filter(
            ~Q(kind=NodeKind.TASK) | reduce(or_, (_TASK_WAITS[wait] for wait in task_waits))
        )
    rows = _of_workflow(rows, "run__workflow_name", filters.workflow)
    values = _page(
        _window(rows, filters, rank, "started_at", int),
        filters,
        "started_at",
        "run",
        "name",
        "kind",
        "prompt",
        "signal_name",
        "awaiting",
        "attempt",
        "round_attempts_before",
        "iteration",
        due_at=Subquery(due.values("due_at")[:1]),
        child=Subquery(child.values("id")[:1]),
        claimer=F(f"claimed_by__{get_user_model().USERNAME_FIELD}"),
        poll=F("polling"),
    )
    for row in values:
        kind = (
            HoldKind.POLL
            if row["poll"]
            else HoldKind.AWAIT
            if row["awaiting"] is not None
            else _STEP_WAITS[row["kind"]]
        )
        waits_for, details = _step_wait(kind, row)
        yield _wait(
            rank,
            row,
            now,
            kind=kind,
            waits_for=waits_for,
            step=row["name"],
            step_id=row["id"],
            due_at=row["due_at"],
            details=details,
        )


def _step_wait(kind: HoldKind, row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if kind == HoldKind.GATE:
        return row["prompt"], {"claimed_by": row["claimer"]}
    if kind == HoldKind.SIGNAL:
        return row["signal_name"], {"signal": row["signal_name"]}
    if kind == HoldKind.CALLBACK:
        # Numbered within the step's round, as every surface numbers attempts.
        return "callback", {"attempt": row["attempt"] - row["round_attempts_before"]}
    if kind == HoldKind.AWAIT:
        signals = row["awaiting"]["signals"]
        return ", ".join(signals), {"signals": signals}
    if kind == HoldKind.POLL:
        return "next poll", {"iteration": row["iteration"]}
    if kind == HoldKind.CHILD:
        child = str(row["child"]) if row["child"] is not None else ""
        return child, {"child_run": child or None}
    return "timer", {}


def _held(model: type[Step] | type[FanOutItem], run: str) -> _Source:
    """Ready steps or items a limit holds (``held_on`` set), one query: ``run`` is the
    path from the row to its run (``run`` for a step, ``step__run`` for an item)."""
    is_item = model is FanOutItem

    def held(filters: _Filters, rank: int, now: datetime) -> Iterator[_Entry]:
        release = Timer.objects.filter(
            **{"item_id" if is_item else "step_id": OuterRef("pk")},
            kind=TimerKind.RELEASE,
            status=TimerStatus.SCHEDULED,
        ).order_by("due_at")
        rows = _of_workflow(
            model.objects.filter(status=StepStatus.READY, held_on__gt="").filter(
                _held_by(filters.kinds)
            ),
            f"{run}__workflow_name",
            filters.workflow,
        )
        values = _page(
            _window(rows, filters, rank, "updated_at", int),
            filters,
            "updated_at",
            run,
            "held_on",
            "attempt",
            due_at=Subquery(release.values("due_at")[:1]),
            step_name=F("step__name" if is_item else "name"),
            step_pk=F("step_id" if is_item else "id"),
            item_key=F("key") if is_item else Value(None, models.CharField()),
        )
        for row in values:
            limit, _, key = row["held_on"].partition(":")
            yield _wait(
                rank,
                row,
                now,
                kind=_LIMITS[limit],
                waits_for=row["held_on"],
                step=row["step_name"],
                step_id=row["step_pk"],
                item=row["item_key"],
                due_at=row["due_at"],
                details={"limit": limit, "key": key, "unit": "item" if is_item else "step"},
            )

    return held


def _held_by(kinds: frozenset[HoldKind]) -> Q:
    """Held work of the limit kinds asked for (no condition when all are)."""
    wanted = [kind for kind in LIMIT_KINDS if kind in kinds]
    if len(wanted) == len(LIMIT_KINDS):
        return Q()
    # Never empty: the source is read only when a limit kind is asked for.
    return reduce(or_, (Q(held_on__startswith=held_marker(kind, "")) for kind in wanted))


def _waiting_runs(status: RunStatus) -> _Source:
    """Runs that have not started, of one status: queued under a run limit, or blocked in
    a flow. One status per query, so that the status index (status, created_at) gives
    the page's order and the read stops at the limit however long the queue is."""

    def waiting(filters: _Filters, rank: int, now: datetime) -> Iterator[_Entry]:
        rows = _of_workflow(Run.objects.filter(status=status), "workflow_name", filters.workflow)
        yield from _runs(_window(rows, filters, rank, "created_at", UUID), filters, rank, now)

    return waiting


def _runs(rows: QuerySet[Run], filters: _Filters, rank: int, now: datetime) -> Iterator[_Entry]:
    """The waits of ``rows`` (runs queued or blocked), with their flow place if any."""
    values = _page(
        rows,
        filters,
        "created_at",
        "",
        "flow_id",
        member=F("flow_member__name"),
        join=F("flow_member__join"),
        join_count=F("flow_member__join_count"),
        flow_name=F("flow__name"),
    )
    for row in values:
        kind = _RUN_WAITS[row["of_run_status"]]
        waits_for, details = _run_wait(kind, row)
        yield _wait(
            rank,
            row,
            now,
            kind=kind,
            waits_for=waits_for,
            details=details,
        )


def _run_wait(kind: HoldKind, row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What a queued run or a blocked member waits for, and the details of a member's."""
    if kind == HoldKind.QUEUED:
        return f"max_concurrent_runs of {row['of_workflow']}", {}
    join = row["join"] or ""
    if row["join_count"] is not None:
        join = f"{join} {row['join_count']}"
    return f"join {join} in flow {row['flow_name']}", {
        "flow": str(row["flow_id"]) if row["flow_id"] else None,
        "flow_name": row["flow_name"],
        "member": row["member"],
        "join": row["join"],
        "join_count": row["join_count"],
    }


# The sources in their order among waits that began at the same moment: each the kinds
# it yields and the function reading them.
_SOURCES: list[tuple[frozenset[HoldKind], _Source]] = [
    (frozenset(_STEP_WAITS.values()) | frozenset(_TASK_WAITS), _waiting_steps),
    (frozenset(_LIMITS.values()), _held(Step, "run")),
    (frozenset(_LIMITS.values()), _held(FanOutItem, "step__run")),
    (frozenset({HoldKind.QUEUED}), _waiting_runs(RunStatus.QUEUED)),
    (frozenset({HoldKind.BLOCKED}), _waiting_runs(RunStatus.BLOCKED)),
]
# The sources whose ids are runs' (UUIDs); the others' are whole numbers.
_RUN_SOURCES = frozenset({3, 4})
