"""Usage budgets: what handlers report (``ctx.report_usage``), counted against the budgets
their workflow declares, and the operator verbs that raise or reset them.

A budget (``workflows.definitions.Budget``) is counted in one ``BudgetCounter`` row per
workflow name (``per="workflow"``, ``scope_key=""``) or per business key
(``per="business_key"``, ``scope_key`` = the run's business key; a run without a
business key is not covered by such a budget). A counter is created on first use with
the declared limit; from then on its ``limit`` is what operators set.

- **Reporting** (:func:`record_usage`) keeps a ``UsageReport`` and adds the amount to
  every counter covering the run, whatever then happens to the attempt: the usage was
  spent. It is not fenced by the lease for the same reason.
- **Holding** (:func:`exhausted`) is asked by the claim engine before it starts a unit
  of a workflow that declares budgets: a pure read of every covering counter in one
  query. The claim then marks the unit ``held_on = "budget:<dimension>"`` or fails it
  with ``BudgetExhausted``, as the budget says.
- **Periods** are measured on the database clock. A counter whose period has ended
  counts as empty; the next report starts a new period (``used = 0``,
  ``period_started_at`` = now) before it adds.
- **Operators** (:func:`raise_budget`, :func:`reset_budget`) change a counter with a
  compare-and-set and, in the same transition, release the ready units held on that
  budget and send them to the executor; the claim asks :func:`exhausted` again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from django.db.models import Case, F, Q, QuerySet, When
from django.db.models.functions import Now

from workflows.definitions import Budget, Route, Workflow, registry
from workflows.engine.dispatch import enqueue
from workflows.engine.executor import Work
from workflows.engine.sql.connection import engine_alias
from workflows.engine.sql.held_units import release_workflow_holds
from workflows.engine.transaction import transition
from workflows.engine.work_kinds import ITEM, STEP, WorkKind
from workflows.errors import BudgetExhausted, DefinitionMissing, InvalidInput, StaleState
from workflows.holds import HoldKind, held_marker
from workflows.models import BudgetCounter, Run, RuntimeBudget, UsageReport

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

logger = logging.getLogger("workflows.budgets")

# The counters' columns: 24 digits, 6 of them after the point.
PLACES = Decimal("0.000001")
LARGEST = Decimal(10) ** 18
HELD_PREFIX = held_marker(HoldKind.BUDGET, "")
# A counter's period is restarted by compare-and-set; each lost race re-reads the row,
# which on PostgreSQL then shows the winner's committed period.
_PERIOD_ATTEMPTS = 5


def held_on(dimension: str) -> str:
    """What a unit held by the budget on ``dimension`` carries in its ``held_on`` column."""
    return f"{HELD_PREFIX}{dimension}"


def as_amount(value: Any, *, what: str = "usage amount") -> Decimal:
    """``value`` as the counters store it: a finite number from 0 to 10**18, kept to six
    decimal places. ``ValueError`` says what is wrong. Floats are read as written
    (``0.1`` is ``Decimal("0.1")``), not as their binary value."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError(f"{what} must be a number (int, float or Decimal), got {value!r}")
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:  # pragma: no cover - every int, float and Decimal converts
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not number.is_finite():
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    if number < 0:
        raise ValueError(f"{what} must not be negative, got {value!r}")
    if number >= LARGEST:
        raise ValueError(f"{what} must be less than 10**18, got {value!r}")
    return number.quantize(PLACES, rounding=ROUND_HALF_EVEN)


def budgets_of(workflow: type[Workflow], *, runtime: bool = True) -> tuple[Budget, ...]:
    """The budgets counting ``workflow``'s usage: its declared ones, each replaced by the
    budget set at run time (``RuntimeBudget``) on the same dimension and ``per`` if
    there is one, then the run-time ones it does not declare. The operator's wins: it
    is the later, deliberate decision, and a deploy that keeps the declaration must not
    undo it. ``runtime=False`` (a claim that read none exist) skips the query."""
    if not runtime:
        return tuple(workflow.budgets)
    rules = {
        (rule.dimension, rule.per): Budget(
            dimension=rule.dimension,
            limit=rule.limit,
            per=rule.per,  # type: ignore[arg-type]
            period=rule.period,
            on_exhausted=rule.on_exhausted,  # type: ignore[arg-type]
        )
        for rule in RuntimeBudget.objects.using(engine_alias())
        .filter(workflow_name=workflow.name)
        .order_by("id")
    }
    merged = [rules.pop((b.dimension, b.per), b) for b in workflow.budgets]
    return (*merged, *rules.values())


def check_usage(budgets: Sequence[Budget], label: str, dimension: str, amount: Any) -> Decimal:
    """Refuse a report no budget of ``budgets`` can count (``ValueError`` naming the
    budgets' dimensions, or what is wrong with the amount); return the amount."""
    known = sorted({budget.dimension for budget in budgets})
    if dimension not in known:
        names = ", ".join(repr(name) for name in known) or "none"
        raise ValueError(f"{label} has no budget on {dimension!r} (budget dimensions: {names})")
    return as_amount(amount)


def _scope_of(budget: Budget, business_key: str | None) -> str | None:
    """The counter's ``scope_key`` covering a run with ``business_key``, or ``None`` when
    the budget does not cover it (a budget per business key, a run without one)."""
    if budget.per == "workflow":
        return ""
    return business_key or None


def _period_ended(started: datetime | None, period: timedelta | None, now: datetime) -> bool:
    return period is not None and (started is None or started + period <= now)


def _counters() -> QuerySet[BudgetCounter]:
    """Counters on the engine's database (never a read replica: they are compared and set)."""
    return BudgetCounter.objects.using(engine_alias())


# -- reporting -------------------------------------------------------------------------


@transition
def record_usage(
    run_id: UUID,
    step_id: int | None,
    attempt: int,
    workflow: type[Workflow],
    dimension: str,
    amount: int | float | Decimal,
) -> None:
    """Record ``amount`` of ``dimension`` used by an attempt of ``run_id``'s step.

    Inserts a ``UsageReport`` and adds the amount to every counter covering the run (its
    workflow's, and its business key's when a budget counts per business key). Not
    fenced: usage reported by an attempt that then fails or loses its lease was spent
    all the same. Inside a transactional handler it commits with the attempt's outcome.

    Race-safe without the run's lock: a missing counter is inserted with ``ON CONFLICT
    DO NOTHING`` and read back, so of two first reports one inserts and both add; the
    add is ``used = used + amount``, commutative, so concurrent reports serialise on the
    counter's row and none is lost. Raises ``ValueError`` (nothing written) for an
    undeclared dimension or a bad amount.
    """
    budgets = budgets_of(workflow)
    value = check_usage(budgets, workflow.label(), dimension, amount)
    business_key = (
        Run.objects.using(engine_alias())
        .filter(pk=run_id)
        .values_list("business_key", flat=True)
        .first()
    )
    UsageReport.objects.using(engine_alias()).create(
        run_id=run_id, step_id=step_id, dimension=dimension, amount=value, attempt=attempt
    )
    _count(workflow.name, budgets, dimension, business_key, value)


@transition
def record_operator_usage(
    workflow: type[Workflow],
    dimension: str,
    amount: Decimal,
    *,
    scope_key: str = "",
    user: AnyUser | None = None,
) -> None:
    """Record ``amount`` of ``dimension`` an operator says ``workflow`` used outside any
    step (a bill paid by hand, a batch run elsewhere), as if a run with business key
    ``scope_key`` had reported it: the workflow's budgets count it, and with a
    ``scope_key`` that key's too. Kept as a ``UsageReport`` without a run, with who
    reported it. Races as :func:`record_usage`; ``ValueError`` for a dimension no budget
    counts (nothing written)."""
    budgets = budgets_of(workflow)
    value = check_usage(budgets, workflow.label(), dimension, amount)
    UsageReport.objects.using(engine_alias()).create(
        workflow_name=workflow.name,
        scope_key=scope_key,
        reported_by=user.get_username() if user is not None else "",
        dimension=dimension,
        amount=value,
    )
    _count(workflow.name, budgets, dimension, scope_key, value)
    logger.info(
        "usage of %s %r reported for %r%s by %s",
        _plain(value),
        dimension,
        workflow.name,
        _scope_text(scope_key),
        user.get_username() if user is not None else "a trusted caller",
    )


def _count(
    workflow_name: str,
    budgets: Sequence[Budget],
    dimension: str,
    business_key: str | None,
    value: Decimal,
) -> None:
    """Add ``value`` to every counter of ``budgets`` on ``dimension`` covering a run with
    ``business_key``."""
    # One order for every report (the budgets' order) so two reports never wait for
    # each other's counters in opposite orders.
    for budget in budgets:
        scope = _scope_of(budget, business_key)
        if budget.dimension != dimension or scope is None:
            continue
        counter_id = _counter_id(workflow_name, budget, scope)
        if budget.period is not None:
            _start_period_if_ended(counter_id, budget.period)
        _add(counter_id, value)


def _counter_id(workflow_name: str, budget: Budget, scope_key: str) -> int:
    """The id of the counter of ``budget`` for ``scope_key``, created with the declared
    limit if missing. Two transactions creating it at once: one inserts, the other's
    insert does nothing (on PostgreSQL after waiting for the first to commit) and it
    reads the first's row."""
    counters = _counters().filter(
        workflow_name=workflow_name, dimension=budget.dimension, scope_key=scope_key
    )
    found = counters.values_list("id", flat=True).first()
    if found is None:
        _counters().bulk_create(
            [
                BudgetCounter(
                    workflow_name=workflow_name,
                    dimension=budget.dimension,
                    scope_key=scope_key,
                    limit=declared_limit(budget),
                )
            ],
            ignore_conflicts=True,
        )
        found = counters.values_list("id", flat=True).get()
    return found


def declared_limit(budget: Budget) -> Decimal:
    return as_amount(budget.limit, what="budget limit")


def _start_period_if_ended(counter_id: int, period: timedelta) -> None:
    """Start a new period (``used = 0``, started now) if the counter's has ended.

    A compare-and-set on the version read: a concurrent report that restarted the
    period (or added to it) first makes it match nothing, and the row is read again.
    """
    for _ in range(_PERIOD_ATTEMPTS):
        version, started, now = (
            _counters()
            .filter(pk=counter_id)
            .annotate(db_now=Now())
            .values_list("version", "period_started_at", "db_now")
            .get()
        )
        if not _period_ended(started, period, now):
            return
        if (
            _counters()
            .filter(pk=counter_id, version=version)
            .update(
                used=Decimal(0),
                period_started_at=Now(),
                version=F("version") + 1,
                updated_at=Now(),
            )
        ):
            return
    raise StaleState(f"budget counter {counter_id} kept changing while its period restarted")


def _add(counter_id: int, amount: Decimal) -> None:
    """``UPDATE … SET used = used + amount, version = version + 1 WHERE id = ?``, and a
    breach counted when this add takes ``used`` from below ``limit`` to or past it.

    The state it expects is the row itself: an increment is commutative, so it needs no
    version to compare (as ``sql.bump_item_counter``); it still bumps ``version`` so a
    compare-and-set that read the counter before sees it changed. The breach test reads
    the row's values before the update (SQL evaluates every ``SET`` on the old row), and
    concurrent adds serialise on the row's lock: of two reports that together cross the
    limit, exactly one sees ``used`` below it and the sum at or past it.
    """
    crossing = Q(used__lt=F("limit"), used__gte=F("limit") - amount)
    _counters().filter(pk=counter_id).update(
        used=F("used") + amount,
        breaches=F("breaches") + Case(When(crossing, then=1), default=0),
        last_breached_at=Case(When(crossing, then=Now()), default=F("last_breached_at")),
        version=F("version") + 1,
        updated_at=Now(),
    )


# -- holding ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Exhaustion:
    """A budget covering a run whose usage has reached its limit."""

    workflow_name: str
    dimension: str
    per: str  # "workflow" or "business_key"
    scope_key: str  # "" for a budget per workflow, else the run's business key
    used: Decimal
    limit: Decimal
    on_exhausted: str  # "hold" or "fail"

    @property
    def held_on(self) -> str:
        """The ``held_on`` value of a unit this budget holds: ``budget:<dimension>``."""
        return held_on(self.dimension)

    @property
    def message(self) -> str:
        scope = f" for business key {self.scope_key!r}" if self.scope_key else ""
        return (
            f"budget {self.dimension!r} of workflow {self.workflow_name!r}{scope} is "
            f"exhausted: {_plain(self.used)} used of {_plain(self.limit)}"
        )

    def error(self) -> BudgetExhausted:
        """The error a unit fails with when the budget says ``on_exhausted="fail"``."""
        return BudgetExhausted(self.message, **self.describe())

    def describe(self) -> dict[str, str]:
        """JSON-ready: for ``explain``, events and the error's details."""
        return {
            "workflow": self.workflow_name,
            "dimension": self.dimension,
            "per": self.per,
            "scope_key": self.scope_key,
            "used": _plain(self.used),
            "limit": _plain(self.limit),
            "on_exhausted": self.on_exhausted,
        }


def _plain(number: Decimal) -> str:
    """``12.500000`` as ``12.5``, ``3.000000`` as ``3``."""
    return format(number.normalize(), "f")


class CoveredRun(Protocol):
    """What :func:`exhausted` reads of a run: a ``Run``, or a claim's row of it."""

    business_key: str


def exhausted(
    workflow: type[Workflow], run: CoveredRun, *, runtime: bool = True
) -> Exhaustion | None:
    """The first budget of ``workflow`` (:func:`budgets_of` order) covering ``run`` whose
    usage has reached its limit, or ``None``. ``runtime=False``: the caller read that
    no budget of the workflow was set at run time (the claim's read says so).

    ``run`` needs ``business_key`` (the locked run of a claim has it). One query for all
    the workflow's budgets; a pure read, so the claim's transaction takes no lock on the
    counters. A budget nobody has reported against yet counts as empty at its declared
    limit; a counter whose period has ended (database clock) counts as empty. A limit
    of 0 is always exhausted.
    """
    covering = [
        (budget, scope)
        for budget in budgets_of(workflow, runtime=runtime)
        if (scope := _scope_of(budget, run.business_key)) is not None
    ]
    if not covering:
        return None
    wanted = Q()
    for budget, scope in covering:
        wanted |= Q(dimension=budget.dimension, scope_key=scope)
    found = {
        (dimension, scope): (used, limit, started, now)
        for dimension, scope, used, limit, started, now in _counters()
        .filter(wanted, workflow_name=workflow.name)
        .annotate(db_now=Now())
        .values_list("dimension", "scope_key", "used", "limit", "period_started_at", "db_now")
    }
    for budget, scope in covering:
        row = found.get((budget.dimension, scope))
        if row is None:
            used, limit = Decimal(0), declared_limit(budget)
        else:
            used, limit, started, now = row
            if _period_ended(started, budget.period, now):
                used = Decimal(0)
        if used >= limit:
            return Exhaustion(
                workflow_name=workflow.name,
                dimension=budget.dimension,
                per=budget.per,
                scope_key=scope,
                used=used,
                limit=limit,
                on_exhausted=budget.on_exhausted,
            )
    return None


# -- operators -------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetChange:
    """What an operator's raise or reset did."""

    counter_id: int
    workflow_name: str
    dimension: str
    scope_key: str
    limit_before: Decimal
    limit: Decimal
    used_before: Decimal
    used: Decimal
    released: int  # ready units no longer held, sent to the executor


def declared_budget(workflow_name: str, dimension: str, scope_key: str) -> Budget:
    """The budget counting ``workflow_name``'s usage of ``dimension`` for that kind of
    scope (declared by its latest registered version, or set at run time:
    :func:`budgets_of`); :class:`InvalidInput` when there is none."""
    per = "business_key" if scope_key else "workflow"
    try:
        workflow = registry.latest(workflow_name)
    except DefinitionMissing:
        raise InvalidInput(
            f"no workflow named {workflow_name!r} is registered, and it has no budget "
            f"counter on {dimension!r}{_scope_text(scope_key)}",
            workflow=workflow_name,
            dimension=dimension,
        ) from None
    found = budgets_of(workflow)
    for budget in found:
        if budget.dimension == dimension and budget.per == per:
            return budget
    names = ", ".join(f"{b.dimension!r} per {b.per}" for b in found) or "none"
    raise InvalidInput(
        f"{workflow.label()} has no budget on {dimension!r} per {per} (budgets: {names})",
        workflow=workflow_name,
        dimension=dimension,
    )


@dataclass(frozen=True)
class BudgetSet:
    """What :func:`set_budget` did."""

    budget: Budget
    created: bool  # no budget was set at run time on this name before
    version: int  # of the ``RuntimeBudget`` row now
    counters: int  # existing counters whose limit it set
    released: int  # ready units no longer held, sent to the executor


@transition
def set_budget(
    workflow: type[Workflow], budget: Budget, *, user: AnyUser | None = None
) -> BudgetSet:
    """Create or change the budget ``workflow`` counts on ``budget.dimension`` per
    ``budget.per``, without a deploy; it replaces a declared one of the same name.

    The ``RuntimeBudget`` row is inserted (``ON CONFLICT DO NOTHING``: of two first
    creations one inserts, the other finds its row) or compare-and-set at the version
    read under its row lock, so of two operators changing it at once both succeed in
    turn and the later one's values stay; ``StaleState`` if the row changed between
    read and write all the same (nothing written). The counters already counting this
    budget take its limit (each compare-and-set at the version read under its lock, so
    a concurrent report's add is never lost), and the ready units it held are released:
    their claims decide again with the new budget.
    """
    limit = declared_limit(budget)
    values = {
        "limit": limit,
        "period": budget.period,
        "on_exhausted": budget.on_exhausted,
        "changed_by": user.get_username() if user is not None else "",
    }
    rules = RuntimeBudget.objects.using(engine_alias())
    named = rules.filter(workflow_name=workflow.name, dimension=budget.dimension, per=budget.per)
    rule = named.select_for_update(no_key=True).first()
    created = rule is None
    if rule is None:
        rules.bulk_create(
            [
                RuntimeBudget(
                    workflow_name=workflow.name,
                    dimension=budget.dimension,
                    per=budget.per,
                    **values,
                )
            ],
            ignore_conflicts=True,
        )
        rule = named.select_for_update(no_key=True).get()
        # Another creation may have won the insert: then this one changes its row.
        created = all(getattr(rule, name) == value for name, value in values.items())
    if not created:
        if not named.filter(version=rule.version).update(
            version=F("version") + 1, updated_at=Now(), **values
        ):
            raise StaleState(
                f"budget {budget.dimension!r} of {workflow.name!r} changed meanwhile; "
                "nothing was written"
            )
        rule.version += 1
    counters = _set_counter_limits(workflow.name, budget)
    released = release_held(workflow.name, budget.dimension)
    logger.info(
        "budget %r of %r per %s %s by %s: limit %s; %d held units released",
        budget.dimension,
        workflow.name,
        budget.per,
        "created" if created else "changed",
        values["changed_by"] or "a trusted caller",
        _plain(limit),
        released,
    )
    return BudgetSet(budget, created, rule.version, counters, released)


def _set_counter_limits(workflow_name: str, budget: Budget) -> int:
    """Give the counters of ``budget`` (the workflow's, or every business key's) its
    limit; how many there were."""
    counters = (
        _counters()
        .select_for_update(no_key=True)
        .filter(workflow_name=workflow_name, dimension=budget.dimension)
    )
    counters = (
        counters.filter(scope_key="")
        if budget.per == "workflow"
        else counters.exclude(scope_key="")
    )
    limit = declared_limit(budget)
    found = list(counters.values_list("id", "version"))
    for counter_id, version in found:
        if (
            not _counters()
            .filter(pk=counter_id, version=version)
            .update(limit=limit, version=F("version") + 1, updated_at=Now())
        ):
            raise StaleState(f"budget counter {counter_id} changed meanwhile; nothing was written")
    return len(found)


def _scope_text(scope_key: str) -> str:
    return f" for business key {scope_key!r}" if scope_key else ""


def _locked_counter(workflow_name: str, dimension: str, scope_key: str) -> BudgetCounter:
    """The counter, locked until commit on PostgreSQL (SQLite: the write lock); created
    with the declared limit when nothing was reported yet."""
    counters = _counters().select_for_update(no_key=True)
    counter = counters.filter(
        workflow_name=workflow_name, dimension=dimension, scope_key=scope_key
    ).first()
    if counter is None:
        budget = declared_budget(workflow_name, dimension, scope_key)
        counter = counters.get(pk=_counter_id(workflow_name, budget, scope_key))
    return counter


def _change(
    workflow_name: str,
    dimension: str,
    scope_key: str,
    user: AnyUser | None,
    *,
    limit: Decimal | None = None,
) -> BudgetChange:
    """Set the counter's ``limit`` (or, without one, its usage to 0) by compare-and-set
    at the version read under its lock, then release the work it held."""
    counter = _locked_counter(workflow_name, dimension, scope_key)
    changes: dict[str, Any] = {"used": Decimal(0)} if limit is None else {"limit": limit}
    if (
        not _counters()
        .filter(pk=counter.pk, version=counter.version)
        .update(version=F("version") + 1, updated_at=Now(), **changes)
    ):
        raise StaleState(f"budget counter {counter.pk} changed meanwhile; nothing was written")
    change = BudgetChange(
        counter_id=counter.pk,
        workflow_name=workflow_name,
        dimension=dimension,
        scope_key=scope_key,
        limit_before=counter.limit,
        limit=changes.get("limit", counter.limit),
        used_before=counter.used,
        used=changes.get("used", counter.used),
        released=release_held(workflow_name, dimension, scope_key),
    )
    what = (
        f"usage reset from {_plain(counter.used)} to 0"
        if limit is None
        else f"limit set from {_plain(counter.limit)} to {_plain(limit)}"
    )
    _log(what, change, user)
    return change


@transition
def raise_budget(
    workflow_name: str,
    dimension: str,
    *,
    limit: int | float | Decimal,
    scope_key: str = "",
    user: AnyUser | None = None,
) -> BudgetChange:
    """Set the limit of a budget counter (normally higher) and release what it held.

    The counter is read under its row lock and compare-and-set at that version, so a
    concurrent report waits for this transition (or this one for it) and neither is
    lost; two operators setting the limit at once both succeed, the later one's limit
    stays. A counter not yet used is created first (the budget must be declared). Then
    the ready units held on ``budget:<dimension>`` of the runs it covers are released
    and sent to the executor (:func:`release_held`).
    """
    new_limit = as_amount(limit, what="budget limit")
    return _change(workflow_name, dimension, scope_key, user, limit=new_limit)


@transition
def reset_budget(
    workflow_name: str, dimension: str, *, scope_key: str = "", user: AnyUser | None = None
) -> BudgetChange:
    """Set a budget counter's usage back to 0 and release what it held.

    The limit and the period's start are kept. Compare-and-set under the counter's row
    lock, as :func:`raise_budget`; a report that commits after the reset counts in the
    new total.
    """
    return _change(workflow_name, dimension, scope_key, user)


def _log(what: str, change: BudgetChange, user: AnyUser | None) -> None:
    by = user.get_username() if user is not None else "a trusted caller"
    logger.info(
        "budget %r of %r%s: %s by %s; %d held units released",
        change.dimension,
        change.workflow_name,
        _scope_text(change.scope_key),
        what,
        by,
        change.released,
        extra={"budget_counter": change.counter_id, "by": by},
    )


def release_held(workflow_name: str, dimension: str, scope_key: str = "") -> int:
    """Release the ready steps and fan-out items held on ``budget:<dimension>`` of the
    runs of ``workflow_name`` (with business key ``scope_key`` when given), and send
    them to the executor. Returns how many were released.

    Set-based compare-and-set: the ``UPDATE`` restates ``status = 'ready'`` and the
    ``held_on`` value, bumps ``version`` and returns the rows it changed, so a unit a
    worker claimed meanwhile is left alone and not sent. ``updated_at`` is kept: a
    released unit keeps its place among the ready work of its priority.
    """
    work: list[tuple[int, Work]] = []
    for kind in (STEP, ITEM):
        work.extend(_release(kind, workflow_name, dimension, scope_key))
    work.sort(key=lambda entry: (-entry[0], entry[1].unit_id))
    enqueue([unit for _, unit in work])
    return len(work)


def _release(
    kind: WorkKind, workflow_name: str, dimension: str, scope_key: str
) -> Sequence[tuple[int, Work]]:
    released = release_workflow_holds(kind.model, held_on(dimension), workflow_name, scope_key)
    return [
        (priority, Work(kind, unit_id, Route.of_row(queue, requires)))
        for unit_id, queue, requires, priority in released
    ]
