"""Usage budgets for operators: read them, raise them, reset them.

What the admin, the API and ``manage.py workflows_budgets`` call. Reading is plain
queries; raising and resetting validate, check who asks (``workflows.operate_run``, the
permission every run verb needs) and call one engine transition
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

from django.db.models import F, Func, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Concat
from django.db.models.lookups import Exact
from django.utils import timezone

from workflows.definitions import Budget, registry
from workflows.engine.limits import budgets
from workflows.engine.limits.budgets import HELD_PREFIX, BudgetChange
from workflows.errors import DefinitionMissing, InvalidInput
from workflows.models import BudgetCounter, FanOutItem, Step
from workflows.services.access import VERBS
from workflows.status import StepStatus
from workflows.validation import check_text, max_length

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = [
    "BudgetChange",
    "BudgetView",
    "budget_counters",
    "budget_view",
    "get_budget",
    "raise_budget",
    "reset_budget",
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


def budget_counters(
    *, workflow: str | None = None, dimension: str | None = None, scope_key: str | None = None
) -> QuerySet[BudgetCounter]:
    """Every budget counter (optionally of one workflow, dimension or scope), with
    ``held_steps`` and ``held_items``: the ready units it holds now. The counts are
    subqueries evaluated for the rows fetched (a page), each served by the partial index
    of held ready units."""
    counters = BudgetCounter.objects.annotate(
        held_steps=_held(Step, "run"), held_items=_held(FanOutItem, "step__run")
    )
    if workflow is not None:
        counters = counters.filter(workflow_name=workflow)
    if dimension is not None:
        counters = counters.filter(dimension=dimension)
    if scope_key is not None:
        counters = counters.filter(scope_key=scope_key)
    return counters


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
    on_exhausted: str | None  # None when the workflow no longer declares the budget
    period: timedelta | None
    period_started_at: datetime | None
    period_ends_at: datetime | None
    held: int
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
            "period_seconds": self.period.total_seconds() if self.period else None,
            "period_started_at": self.period_started_at,
            "period_ends_at": self.period_ends_at,
            "held": self.held,
            "version": self.version,
            "updated_at": self.updated_at,
        }


def _declared(counter: BudgetCounter) -> Budget | None:
    per = "business_key" if counter.scope_key else "workflow"
    try:
        workflow = registry.latest(counter.workflow_name)
    except DefinitionMissing:
        return None
    return next(
        (b for b in workflow.budgets if b.dimension == counter.dimension and b.per == per), None
    )


def budget_view(counter: BudgetCounter, now: datetime | None = None) -> BudgetView:
    """``counter`` (from :func:`budget_counters`) read with its declaration, at ``now``
    (the application's clock: a display, not a decision; the engine decides on the
    database's)."""
    now = now or timezone.now()
    declared = _declared(counter)
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
        period=period,
        period_started_at=counter.period_started_at if ends_at else None,
        period_ends_at=ends_at,
        held=held,
        version=counter.version,
        updated_at=counter.updated_at,
    )


def _check_names(workflow_name: str, dimension: str, scope_key: str) -> None:
    check_text(workflow_name, field="workflow", limit=max_length(BudgetCounter, "workflow_name"))
    check_text(dimension, field="dimension", limit=max_length(BudgetCounter, "dimension"))
    if scope_key:
        check_text(scope_key, field="business key", limit=max_length(BudgetCounter, "scope_key"))


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
    try:
        value = budgets.as_amount(Decimal(limit) if isinstance(limit, str) else limit, what="limit")
    except (ValueError, ArithmeticError) as exc:
        message = str(exc) if isinstance(exc, ValueError) else f"limit is not a number: {limit!r}"
        raise InvalidInput(message, field="limit") from None
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
