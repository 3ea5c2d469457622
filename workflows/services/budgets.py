"""Usage budgets for operators: read them, create or change them, raise them, reset
them, report usage made outside any step.

What the admin, the API and ``manage.py workflows_budgets`` call. Reading is plain
queries; the writes validate (every bad argument is :class:`InvalidInput` naming it,
before anything is written), check who asks (``workflows.operate_run``, the permission
every run verb needs) and call one engine transition
(:mod:`workflows.engine.limits.budgets`), which also releases the work the budget held.

Who changed a budget is logged (``workflows.budgets``, with the user's name); the admin
adds a ``LogEntry`` on the counter. No run event is written: one raise may release work
of thousands of runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db.models import Case, F, Func, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Concat
from django.db.models.lookups import Exact
from django.utils import timezone

from workflows.definitions import Budget, Workflow, registry
from workflows.definitions.limits import name_problems
from workflows.engine.limits import budgets
from workflows.engine.limits.budgets import HELD_PREFIX, BudgetChange, BudgetSet
from workflows.errors import DefinitionMissing, InvalidInput
from workflows.models import BudgetCounter, FanOutItem, RuntimeBudget, Step
from workflows.services.access import VERBS
from workflows.status import StepStatus
from workflows.validation import check_text, max_length

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = [
    "BudgetChange",
    "BudgetSet",
    "BudgetView",
    "budget_counters",
    "budget_view",
    "create_budget",
    "get_budget",
    "raise_budget",
    "report_usage",
    "reset_budget",
    "runtime_budgets",
]


def _held(model: type[Step] | type[FanOutItem], run_path: str) -> Subquery:
    """How many ready units of ``model`` the counter (``OuterRef``) holds: its workflow's
    runs, and only its business key's when it counts per business key."""
    units = model.objects.filter(
        Q(Exact(OuterRef("scope_key"), Value("")))
        | Q(**{f"{run_path}__business_key": OuterRef("scope_key")}),
        status=StepStatus.READY,
        held_on=Concat(Value(HELD_PREFIX), OuterRef("dimension")),
        **{f"{run_path}__workflow_name": OuterRef("workflow_name")},
    )
    return Subquery(
        units.order_by().annotate(count=Func(F("pk"), function="COUNT")).values("count")
    )


def _rule(column: str) -> Subquery:
    """``column`` of the budget set at run time that the counter (``OuterRef``) counts
    for, or NULL: read in the counters' own query, so a page costs no query per row."""
    per = Case(
        When(Exact(OuterRef("scope_key"), Value("")), then=Value("workflow")),
        default=Value("business_key"),
    )
    rules = RuntimeBudget.objects.filter(
        workflow_name=OuterRef("workflow_name"), dimension=OuterRef("dimension"), per=per
    )
    return Subquery(rules.values(column)[:1])


def budget_counters(
    *, workflow: str | None = None, dimension: str | None = None, scope_key: str | None = None
) -> QuerySet[BudgetCounter]:
    """Every budget counter (optionally of one workflow, dimension or scope), with
    ``held_steps`` and ``held_items``: the ready units it holds now, and ``rule_limit``,
    ``rule_period``, ``rule_on_exhausted``: the budget set at run time it counts for, if
    any. Subqueries evaluated for the rows fetched (a page); the held counts are served
    by the partial index of held ready units, the budget by its unique index."""
    counters = BudgetCounter.objects.annotate(
        held_steps=_held(Step, "run"),
        held_items=_held(FanOutItem, "step__run"),
        rule_limit=_rule("limit"),
        rule_period=_rule("period"),
        rule_on_exhausted=_rule("on_exhausted"),
    )
    if workflow is not None:
        counters = counters.filter(workflow_name=workflow)
    if dimension is not None:
        counters = counters.filter(dimension=dimension)
    if scope_key is not None:
        counters = counters.filter(scope_key=scope_key)
    return counters


def runtime_budgets(*, workflow: str | None = None) -> QuerySet[RuntimeBudget]:
    """The budgets set at run time (``create_budget``), optionally of one workflow:
    shown even before anything was counted against them."""
    found = RuntimeBudget.objects.all()
    return found if workflow is None else found.filter(workflow_name=workflow)


def get_budget(counter_id: int | str) -> BudgetCounter:
    """One counter with its held counts; ``BudgetCounter.DoesNotExist`` if none has the id."""
    try:
        pk = int(counter_id)
    except (TypeError, ValueError):
        raise BudgetCounter.DoesNotExist(f"no budget counter has id {counter_id!r}") from None
    found = budget_counters().filter(pk=pk).first()
    if found is None:
        raise BudgetCounter.DoesNotExist(f"no budget counter has id {counter_id!r}")
    return found


@dataclass(frozen=True)
class BudgetView:
    """A counter as operators read it: what is used now, of what limit, until when."""

    id: int
    workflow_name: str
    dimension: str
    per: str  # "workflow" or "business_key"
    scope_key: str
    used: Decimal  # in the current period: 0 once the period has ended
    limit: Decimal
    remaining: Decimal
    exhausted: bool
    on_exhausted: str | None  # None when the workflow no longer has the budget
    # "code" (Workflow.budgets), "run time" (create_budget), None: no longer has it.
    origin: str | None
    period: timedelta | None
    period_started_at: datetime | None
    period_ends_at: datetime | None
    held: int
    breaches: int  # reports that took the usage from below the limit to or past it
    last_breached_at: datetime | None
    version: int
    updated_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workflow": self.workflow_name,
            "dimension": self.dimension,
            "per": self.per,
            "scope_key": self.scope_key,
            "used": self.used,
            "limit": self.limit,
            "remaining": self.remaining,
            "exhausted": self.exhausted,
            "on_exhausted": self.on_exhausted,
            "origin": self.origin,
            "period_seconds": self.period.total_seconds() if self.period else None,
            "period_started_at": self.period_started_at,
            "period_ends_at": self.period_ends_at,
            "held": self.held,
            "breaches": self.breaches,
            "last_breached_at": self.last_breached_at,
            "version": self.version,
            "updated_at": self.updated_at,
        }


def _declared(counter: BudgetCounter) -> tuple[Budget, str] | None:
    """The budget counting into ``counter`` and where it comes from ("code" or "run
    time"); ``None`` when its workflow no longer has it. The run-time one comes with the
    counter from :func:`budget_counters`; the declared one from the registry."""
    per = "business_key" if counter.scope_key else "workflow"
    if not hasattr(counter, "rule_on_exhausted"):  # not read by budget_counters()
        counter = budget_counters().get(pk=counter.pk)
    on_exhausted = getattr(counter, "rule_on_exhausted", None)
    if on_exhausted is not None:
        rule = Budget(
            counter.dimension,
            getattr(counter, "rule_limit", counter.limit),
            per=per,  # type: ignore[arg-type]
            period=getattr(counter, "rule_period", None),
            on_exhausted=on_exhausted,
        )
        return rule, "run time"
    try:
        workflow = registry.latest(counter.workflow_name)
    except DefinitionMissing:
        return None
    found = (b for b in workflow.budgets if b.dimension == counter.dimension and b.per == per)
    declared = next(found, None)
    return (declared, "code") if declared is not None else None


def budget_view(counter: BudgetCounter, now: datetime | None = None) -> BudgetView:
    """``counter`` (from :func:`budget_counters`) read with its declaration, at ``now``
    (the application's clock: a display, not a decision; the engine decides on the
    database's)."""
    now = now or timezone.now()
    found = _declared(counter)
    declared, origin = found if found else (None, None)
    period = declared.period if declared else None
    used = counter.used
    ends_at = None
    if period is not None:
        if counter.period_started_at is None:
            used = Decimal(0)
        else:
            ends_at = counter.period_started_at + period
            if ends_at <= now:
                used, ends_at = Decimal(0), None
    held = getattr(counter, "held_steps", 0) + getattr(counter, "held_items", 0)
    return BudgetView(
        id=counter.pk,
        workflow_name=counter.workflow_name,
        dimension=counter.dimension,
        per="business_key" if counter.scope_key else "workflow",
        scope_key=counter.scope_key,
        used=used,
        limit=counter.limit,
        remaining=max(counter.limit - used, Decimal(0)),
        exhausted=used >= counter.limit,
        on_exhausted=declared.on_exhausted if declared else None,
        origin=origin,
        period=period,
        period_started_at=counter.period_started_at if ends_at else None,
        period_ends_at=ends_at,
        held=held,
        breaches=counter.breaches,
        last_breached_at=counter.last_breached_at,
        version=counter.version,
        updated_at=counter.updated_at,
    )


def _check_names(workflow_name: str, dimension: str, scope_key: str) -> None:
    check_text(workflow_name, field="workflow", limit=max_length(BudgetCounter, "workflow_name"))
    check_text(dimension, field="dimension", limit=max_length(BudgetCounter, "dimension"))
    if scope_key:
        check_text(scope_key, field="business key", limit=max_length(BudgetCounter, "scope_key"))


def _amount(value: Any, field: str) -> Decimal:
    """``value`` (a number, or its decimal text from a form or the command line) as the
    counters store it; :class:`InvalidInput` naming ``field`` otherwise."""
    try:
        return budgets.as_amount(Decimal(value) if isinstance(value, str) else value, what=field)
    except (ValueError, ArithmeticError) as exc:
        message = str(exc) if isinstance(exc, ValueError) else f"{field} is not a number: {value!r}"
        raise InvalidInput(message, field=field) from None


def _text(value: Any, field: str, column: str) -> str:
    """``value`` checked as text the counters' ``column`` stores (:func:`check_text`);
    :class:`InvalidInput` naming ``field`` otherwise."""
    try:
        return check_text(value, field=field, limit=max_length(BudgetCounter, column))
    except InvalidInput as refused:
        raise InvalidInput(refused.message, field=field) from None


def _workflow(workflow: str | type[Workflow]) -> type[Workflow]:
    """The latest registered version of ``workflow`` (a name or a class): budgets are
    counted by workflow name, whatever version a run started on."""
    name = (
        workflow.name if isinstance(workflow, type) and issubclass(workflow, Workflow) else workflow
    )
    _text(name, "workflow", "workflow_name")
    try:
        return registry.latest(name)
    except DefinitionMissing:
        raise InvalidInput(f"no workflow named {name!r} is registered", field="workflow") from None


def _budget_input(dimension: Any, limit: Any, per: Any, period: Any, on_exhausted: Any) -> Budget:
    """The budget these arguments name, each checked; :class:`InvalidInput` names the
    first that is wrong."""
    for problem in name_problems("dimension", dimension):
        raise InvalidInput(problem, field="dimension")
    value = _amount(limit, "limit")
    if per not in ("workflow", "business_key"):
        raise InvalidInput(f"per must be 'workflow' or 'business_key', got {per!r}", field="per")
    if period is not None and (not isinstance(period, timedelta) or period <= timedelta(0)):
        raise InvalidInput(
            f"period must be None or a positive timedelta, got {period!r}", field="period"
        )
    if on_exhausted not in ("hold", "fail"):
        raise InvalidInput(
            f"on_exhausted must be 'hold' or 'fail', got {on_exhausted!r}", field="on_exhausted"
        )
    return Budget(dimension, value, per=per, period=period, on_exhausted=on_exhausted)


def create_budget(
    workflow: str | type[Workflow],
    dimension: str,
    *,
    limit: int | float | Decimal | str,
    per: str = "workflow",
    period: timedelta | None = None,
    on_exhausted: str = "hold",
    user: AnyUser | None = None,
) -> BudgetSet:
    """Create or change the budget ``workflow`` counts on ``dimension`` (for the whole
    workflow, or each business key apart with ``per="business_key"``), without a deploy.

    It replaces a budget the workflow declares on the same dimension and ``per``: the
    operator's is the later, deliberate decision (``docs/guide/budgets.md``). The
    counters already counting it take the new limit, and the work it held is released
    so its claims decide again. ``limit`` is a number >= 0 (or its decimal text);
    ``period`` a positive ``timedelta`` or ``None``. :class:`InvalidInput` names a bad
    argument (nothing written), ``PermissionDenied`` a user without
    ``workflows.operate_run``, :class:`StaleState` a change that lost a race.
    """
    VERBS["create_budget"].check_named(user)
    definition = _workflow(workflow)
    budget = _budget_input(dimension, limit, per, period, on_exhausted)
    return budgets.set_budget(definition, budget, user=user)


def report_usage(
    workflow: str | type[Workflow],
    dimension: str,
    amount: int | float | Decimal | str,
    *,
    scope_key: str = "",
    user: AnyUser | None = None,
) -> list[BudgetView]:
    """Record usage of ``dimension`` made outside any step, counted as a step's
    ``ctx.report_usage`` is: against the workflow's budget, and with ``scope_key`` that
    business key's too. Kept in the usage history with who reported it. Returns the
    counters it counted into, read after. :class:`InvalidInput` names a bad argument
    (a dimension no budget of the workflow counts, an amount that is not a number >= 0),
    ``PermissionDenied`` a user without ``workflows.operate_run``."""
    VERBS["report_usage"].check_named(user)
    definition = _workflow(workflow)
    _text(dimension, "dimension", "dimension")
    _text(scope_key, "scope_key", "scope_key")
    value = _amount(amount, "amount")
    try:
        budgets.record_operator_usage(definition, dimension, value, scope_key=scope_key, user=user)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="dimension") from None
    counted = budget_counters(workflow=definition.name, dimension=dimension).filter(
        scope_key__in={"", scope_key}
    )
    return [budget_view(counter) for counter in counted]


def raise_budget(
    workflow_name: str,
    dimension: str,
    *,
    limit: int | float | Decimal | str,
    scope_key: str = "",
    user: AnyUser | None = None,
) -> BudgetChange:
    """Set the limit of a budget (of the workflow, or of one business key with
    ``scope_key``) and let the work it held start again. ``limit`` is a number >= 0
    (or its decimal text); :class:`InvalidInput` names what is wrong, and
    ``PermissionDenied`` a user without ``workflows.operate_run`` (``user=None`` is
    trusted code: the verb table, :mod:`workflows.services.access`)."""
    VERBS["raise_budget"].check_named(user)
    _check_names(workflow_name, dimension, scope_key)
    value = _amount(limit, "limit")
    return budgets.raise_budget(
        workflow_name, dimension, limit=value, scope_key=scope_key, user=user
    )


def reset_budget(
    workflow_name: str, dimension: str, *, scope_key: str = "", user: AnyUser | None = None
) -> BudgetChange:
    """Set a budget's usage back to 0 and let the work it held start again."""
    VERBS["reset_budget"].check_named(user)
    _check_names(workflow_name, dimension, scope_key)
    return budgets.reset_budget(workflow_name, dimension, scope_key=scope_key, user=user)
