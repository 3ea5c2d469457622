"""May this unit of leased work start now? Limits, checked in the claim transaction.

A claim asks, in order: does this worker serve the unit's route (queue and required
capabilities); does an exhausted budget cover its run; is there a free slot under its
concurrency key; does its task's and queue's rate limit allow a start. Every answer is
read and written in the claim's own transaction, so limits hold across any number of
workers, and a claim that loses a race changes nothing.

Work that may not start yet stays ``ready`` and is *held*: its ``held_on`` column
names why (``concurrency:<key>``, ``rate:<key>``, ``budget:<dimension>``), for
``explain`` and for whatever releases it — the end of an attempt holding a slot of
the key, the ``release`` timer a rate limit sets for when a start is allowed, an
operator raising the budget. A held unit is never failed by a limit, except by a
budget declared ``on_exhausted="fail"``.

A worker finishing a step chains into the next one through the same checks, in the
transition that released it (``claims.claim_in_scope``); a unit they hold goes
``ready`` and through the queue, whose claim records the hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db.models import F
from django.utils import timezone

from workflows.conf import workflow_settings
from workflows.context import Context
from workflows.definitions import LeasedNode, Workflow, registry
from workflows.definitions.limits import RateLimit, Route
from workflows.engine.dispatch import enqueue
from workflows.engine.executor import Work
from workflows.engine.limits import budgets, rates, slots
from workflows.engine.sql.claim_reads import ClaimRow
from workflows.engine.sql.held_units import best_held
from workflows.engine.sql.updates import cas_update
from workflows.engine.transaction import transition
from workflows.engine.wakeups import timer_armed
from workflows.engine.work_kinds import ITEM, STEP, WorkKind
from workflows.errors import DefinitionMissing, PermanentError
from workflows.holds import HoldKind, held_marker
from workflows.models import Timer
from workflows.status import StepStatus, TimerKind, TimerStatus

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from workflows.engine.lease import Lease
    from workflows.engine.scope import RunScope


@dataclass(frozen=True)
class Hold:
    """The unit may not start yet: ``held_on`` says why; a rate limit says until when."""

    held_on: str
    retry_after: float | None = None


@dataclass(frozen=True)
class Admitted:
    """The unit may start; ``refusal``: it starts only to fail at once with this error
    (a budget declared ``on_exhausted="fail"``, a concurrency key that cannot be
    computed), so it fails through the same path as a handler's error."""

    refusal: Exception | None = None


# Compensations are never limited: undoing finished work must not wait for a budget
# or a rate, and it runs one record at a time per run anyway.
_LIMITED_KINDS = (STEP, ITEM)


def _queue_rate(workflow: type[Workflow], node: LeasedNode) -> tuple[str, str] | None:
    """The queue of ``node``'s work and its rate in ``QUEUE_RATE_LIMITS``, if it has one."""
    queue_limits = workflow_settings.QUEUE_RATE_LIMITS
    if not queue_limits:  # usually none: no route to look up
        return None
    queue = workflow.route_of(node.name).queue
    return (queue, queue_limits[queue]) if queue in queue_limits else None


def rate_limits(workflow: type[Workflow], node: LeasedNode) -> list[tuple[str, RateLimit]]:
    """The rate limits a start of ``node``'s work counts against: the task's, the queue's."""
    found = []
    if node.rate_limit is not None:
        found.append((f"task:{workflow.name}.{node.name}", RateLimit.parse(node.rate_limit)))
    queue_rate = _queue_rate(workflow, node)
    if queue_rate is not None:
        queue, rate = queue_rate
        found.append((f"queue:{queue}", RateLimit.parse(rate)))
    return found


def limited(workflow: type[Workflow], node: LeasedNode, *, runtime_budgets: bool) -> bool:
    """Tell whether a start of ``node``'s work must be admitted by a claim.

    Asked for every chained step: the declared limits first, then the budgets set at
    run time (``runtime_budgets``: read with the run or the claim), the project's queue
    limits (usually none) last.
    """
    if (
        node.concurrency_key is not None
        or node.rate_limit is not None
        or workflow.budgets
        or runtime_budgets
    ):
        return True
    return _queue_rate(workflow, node) is not None


def concurrency_key(workflow: type[Workflow], node: LeasedNode, row: ClaimRow) -> str:
    """The key ``node.concurrency_key(ctx)`` gives for this unit (its run, its item)."""
    assert node.concurrency_key is not None
    ctx = Context(
        run_id=row.run_id,
        input=row.run_input,
        step_names=tuple(workflow.nodes),
        step_name=node.name,
        attempt=row.attempt + 1,
        item=row.item,
    )
    key = node.concurrency_key(ctx)
    if not isinstance(key, str | int) or isinstance(key, bool) or str(key) == "":
        raise TypeError(f"concurrency_key must return a non-empty string, got {key!r}")
    return str(key)


def admit(
    kind: WorkKind, row: ClaimRow, node: LeasedNode, workflow: type[Workflow]
) -> Admitted | Hold:
    """Decide, inside the claim transaction, whether ``row`` may start now.

    Raises nothing for a limit: a :class:`Hold` says the unit waits (the caller records
    it with :func:`hold`), an :class:`Admitted` with a ``refusal`` that it fails. A slot
    taken here is released again when a later check holds the unit.
    """
    if kind not in _LIMITED_KINDS or not limited(
        workflow, node, runtime_budgets=row.runtime_budgets
    ):
        return Admitted()
    exhausted = (
        budgets.exhausted(workflow, row, runtime=row.runtime_budgets)
        if workflow.budgets or row.runtime_budgets
        else None
    )
    if exhausted is not None:
        if exhausted.on_exhausted == "fail":
            return Admitted(refusal=exhausted.error())
        return Hold(exhausted.held_on)
    holder = None
    if node.concurrency_key is not None:
        try:
            key = concurrency_key(workflow, node, row)
        except Exception as exc:
            refusal = PermanentError(f"concurrency_key of step {node.name!r} failed: {exc!r}")
            refusal.__cause__ = exc
            return Admitted(refusal=refusal)
        holder = slots.Holder(kind.name, row.pk, row.attempt + 1)
        assert node.max_concurrent is not None
        if not slots.acquire(key, node.max_concurrent, holder):
            return Hold(held_marker(HoldKind.CONCURRENCY, key))
    limits = rate_limits(workflow, node)
    refused = rates.take(limits) if limits else None
    if refused is not None:
        if holder is not None:
            slots.release(holder)
        key, wait = refused
        return Hold(held_marker(HoldKind.RATE, key), retry_after=wait)
    return Admitted()


def attempt_ended(scope: RunScope, holder: slots.Holder) -> None:
    """Free the concurrency slots ``holder`` (an attempt that just left ``running``)
    took, and let the best unit held on each of their keys start: cleared of its hold
    and sent to the executor when ``scope`` commits.

    A slot frees itself anyway once its holder is no longer running (``engine.slots``):
    this only makes the held work start at once instead of at the next recovery pass.
    """
    for key in slots.release(holder):
        for kind in (STEP, ITEM):
            for work in unhold_next(kind, held_marker(HoldKind.CONCURRENCY, key)):
                scope.dispatch(*work)


def free_attempt_slot(scope: RunScope, lease: Lease) -> None:
    """Free the concurrency slot ``lease``'s attempt holds, if its node counts under a
    key (:func:`attempt_ended`): for every transition that ends an attempt."""
    holder = attempt_holder(lease)
    if holder is not None:
        attempt_ended(scope, holder)


def attempt_holder(lease: Lease) -> slots.Holder | None:
    """The slot holder of ``lease``'s attempt, if its node counts under a concurrency key."""
    if lease.node.concurrency_key is None:
        return None
    return slots.Holder(lease.kind.name, lease.unit_id, lease.attempt)


def hold(kind: WorkKind, row: ClaimRow, held: Hold) -> None:
    """Record why ``row`` did not start: its ``held_on``, and for a rate limit a
    ``release`` timer for when a start is allowed (unless one is already set).

    A compare-and-set on the ready row, which keeps its place in the queue (its
    ``updated_at``): if another worker claimed it meanwhile, nothing is written.
    """
    if row.held_on != held.held_on and not cas_update(
        kind.model,
        row.pk,
        version=row.version,
        where={"status": StepStatus.READY},
        held_on=held.held_on,
    ):
        return
    if held.retry_after is None:
        return
    unit = {f"{kind.timer_field}_id": row.pk}
    if Timer.objects.filter(kind=TimerKind.RELEASE, status=TimerStatus.SCHEDULED, **unit).exists():
        return
    due_at = _due_in(held.retry_after)
    Timer.objects.create(
        run_id=row.run_id,
        step_id=row.step_id,
        kind=TimerKind.RELEASE,
        due_at=due_at,
        **({} if kind.timer_field == "step" else unit),
    )
    timer_armed(due_at)


def _due_in(seconds: float) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def unhold_next(kind: WorkKind, held_on: str, count: int = 1) -> list[Work]:
    """Clear the hold of the ``count`` best units of ``kind`` held on ``held_on``
    (highest priority, then oldest) and return them to dispatch again.

    One at a time, not every held unit: a slot that frees lets one unit start, and
    nudging all of them would only hold all but one again. Each clear is a
    compare-and-set restating ``ready`` and the hold: a unit claimed or released
    meanwhile is left alone.
    """
    return [
        Work(kind, unit_id, Route.of_row(queue, requires))
        for unit_id, version, queue, requires in best_held(kind.model, held_on, count)
        if cas_update(
            kind.model,
            unit_id,
            version=version,
            where={"status": StepStatus.READY, "held_on": held_on},
            held_on="",
        )
    ]


@transition
def nudge_held(kind: WorkKind, held_on: str) -> bool:
    """Send the best unit of ``kind`` held on ``held_on`` to the executor again, its hold
    kept: its claim decides once more, and holds it again (writing nothing) if the limit
    still binds. ``False`` when no unit of an active run is held there any more, or, for
    a budget's hold, when no held unit's budgets would admit it now.

    The backstop for holds whose release was not handed on: a slot freed by a path that
    does not (a cancelled or terminated run), a budget's period that ended. A budget's
    hold is asked first (the same pure read the claim makes), so work held by a budget
    still used up is not sent to a worker, and logged, on every pass.
    """
    runs = {f"{kind.run_path}__status__in": kind.runs_while}
    held = kind.model.objects.filter(status=StepStatus.READY, held_on=held_on, **runs).order_by(
        "-priority", "updated_at", "id"
    )
    if held_on.startswith(budgets.HELD_PREFIX):
        found = _admitted_by_budget(held, kind)
    else:
        found = held.values_list("id", "queue", "requires").first()
    if found is None:
        return False
    unit_id, queue, requires = found
    route = Route.of_row(queue, requires)
    if route.external:
        # No queue carries it to a claim that decides again: its hold is cleared, so the
        # next claim_external decides (and holds it again if the limit still binds).
        cleared = kind.model.objects.filter(
            pk=unit_id, status=StepStatus.READY, held_on=held_on
        ).update(held_on="", version=F("version") + 1)
        if not cleared:
            return False
    enqueue([Work(kind, unit_id, route)])
    return True


# A budget's hold covers runs of several workflows and business keys: the nudge looks at
# this many of its best units for one whose budgets admit it now.
BUDGET_NUDGE_CANDIDATES = 50


@dataclass
class _HeldRun:
    """What :func:`budgets.exhausted` reads of a held unit's run."""

    business_key: str


def _admitted_by_budget(held: QuerySet[Any], kind: WorkKind) -> tuple[int, str, str] | None:
    """The best of ``held`` whose run's budgets admit it now (:func:`budgets.exhausted`),
    or ``None``: every one would be held again. A unit whose definition is missing is
    sent, so that its claim fails its run as it would any other's."""
    run = kind.run_path
    rows = held.values_list(
        "id",
        "queue",
        "requires",
        f"{run}__workflow_name",
        f"{run}__workflow_version",
        f"{run}__business_key",
    )[:BUDGET_NUDGE_CANDIDATES]
    for unit_id, queue, requires, name, version, business_key in rows:
        try:
            workflow = registry.get(name, version)
        except DefinitionMissing:
            return unit_id, queue, requires
        if budgets.exhausted(workflow, _HeldRun(business_key or "")) is None:
            return unit_id, queue, requires
    return None
