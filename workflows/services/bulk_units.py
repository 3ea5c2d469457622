"""Bulk recovery of stuck units: one unit verb over the steps, fan-out items or
compensations a filter selects, with a dry run that advises.

What ``workflows.bulk(verb, units=...)`` does (:mod:`workflows.services.bulk` hands it
over) and what ``workflows_bulk --units``, the console's "Recover stuck units" page and
``POST /api/runs/bulk/units/{verb}/`` call. The verbs are those an operator has for one
unit: ``revoke`` (:func:`workflows.engine.verbs.revoke.revoke_lease`: the running
attempt loses its lease and the work runs again), ``fail_step``
(:func:`workflows.engine.verbs.fail.fail_unit`: the stuck work ends as failed) and
``retry_step`` (:func:`workflows.services.retry_step`: a failed step of a failed run
runs again). ``retry_step`` is refused for items and compensations, whose retry is their
owner's: a failed item runs again when its fan-out step is retried, a failed
compensation when its ``compensation_failed`` run is.

Each unit is its own transaction calling the verb on that one unit, pinned to what the
bulk read of it (its status and attempt, and a step's round): a unit that moved on
between the read and the verb (claimed, retried, ended) is refused by the verb's own
fence and reported as skipped with the reason, never overwritten; one refused or
failing unit neither stops the batch nor undoes the units done before it. A dry run reads
the selection and asks the verb's guard (:mod:`workflows.engine.guards`) about each unit:
advice, which the verb checks again under the run's lock when applied.

Memory stays bounded as for runs: units are read as small tuples, ``CHUNK_SIZE`` at a
time, by keyset pagination on the unit table's primary key, so a verb that moves units
out of the selection (a revoke of ``held_on="lease"`` work) neither skips nor repeats
one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.utils import timezone

from workflows.definitions.limits import EXTERNAL_MARK
from workflows.definitions.registry import registry
from workflows.engine.guards import FAIL_STEP, RETRY_STEP, REVOKE, StepVerb
from workflows.engine.verbs import fail, revoke
from workflows.engine.work_kinds import COMPENSATION, ITEM, STEP, WorkKind
from workflows.errors import InvalidInput, InvalidTransition, StaleState, WorkflowError
from workflows.holds import HoldKind
from workflows.models import Run
from workflows.services.bulk_outcomes import DONE, ELIGIBLE, FAILED, SKIPPED, UnitItem
from workflows.services.leases import not_revoked_text
from workflows.services.steps import retry_step
from workflows.status import CompensationStatus, StepStatus
from workflows.validation import check_text, max_length

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = [
    "HELD_ON",
    "UNIT_KINDS",
    "UNIT_KIND_CHOICES",
    "UNIT_VERBS",
    "UnitFilter",
    "check_options",
    "iter_bulk_units",
    "unit_filter",
]

# Units read per query, as for runs.
CHUNK_SIZE = 500

UNIT_KINDS: dict[str, WorkKind] = {kind.name: kind for kind in (STEP, ITEM, COMPENSATION)}
# The kinds as choices, for a form's or a schema's enum (``UnitKindEnum``).
UNIT_KIND_CHOICES: tuple[str, ...] = tuple(UNIT_KINDS)
# The statuses each kind of unit can be in (compensations have fewer).
_STATUSES: dict[str, tuple[str, ...]] = {
    STEP.name: tuple(StepStatus.values),
    ITEM.name: tuple(StepStatus.values),
    COMPENSATION.name: tuple(CompensationStatus.values),
}
_READY = Q(status=StepStatus.READY)
# What holds a unit (``explain``'s hold kinds), for the kinds a unit's own row tells:
# a worker runs it, it waits for its next attempt, ready work an external worker must
# claim, or ready work a limit holds (the ``held_on`` its last claim wrote).
HELD_ON: dict[str, Q] = {
    HoldKind.LEASE: Q(status=StepStatus.RUNNING),
    HoldKind.RETRY: Q(status=StepStatus.RETRY_SCHEDULED),
    HoldKind.EXTERNAL: _READY & Q(requires__startswith=EXTERNAL_MARK, held_on=""),
    HoldKind.CONCURRENCY: _READY & Q(held_on__startswith=f"{HoldKind.CONCURRENCY}:"),
    HoldKind.RATE: _READY & Q(held_on__startswith=f"{HoldKind.RATE}:"),
    HoldKind.BUDGET: _READY & Q(held_on__startswith=f"{HoldKind.BUDGET}:"),
}


@dataclass(frozen=True)
class UnitFilter:
    """Which units a bulk acts on: all criteria given must hold.

    ``kind``: ``step``, ``item`` or ``compensation``. ``statuses``: any of these
    (the kind's statuses). ``workflow``: of runs of this workflow (name). ``queue``:
    routed to this queue. ``held_on``: held as ``explain`` says (``lease``, ``retry``,
    ``external``, ``concurrency``, ``rate``, ``budget``). ``older_than``: unchanged for
    longer than this (``updated_at``; a claim, a heartbeat or any other write is a
    change, so a worker that still heartbeats keeps its unit young: select wedged ones
    by ``held_on="lease"`` and their run instead).
    """

    kind: str
    statuses: tuple[str, ...] = ()
    workflow: str | None = None
    queue: str | None = None
    held_on: str | None = None
    older_than: timedelta | None = None


def unit_filter(units: UnitFilter | Mapping[str, Any]) -> UnitFilter:
    """``units`` checked, as a :class:`UnitFilter`: :class:`InvalidInput` naming the field
    for an unknown key, kind, status, workflow or hold kind, a bad queue or duration."""
    if isinstance(units, UnitFilter):
        given = {spec.name: getattr(units, spec.name) for spec in fields(UnitFilter)}
    elif isinstance(units, Mapping):
        given = dict(units)
    else:
        raise InvalidInput(
            f"units must be a UnitFilter or a mapping, not {type(units).__name__}", field="units"
        )
    known = {spec.name for spec in fields(UnitFilter)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise InvalidInput(
            f"units takes {', '.join(sorted(known))}; not {', '.join(unknown)}", field=unknown[0]
        )
    kind = given.get("kind")
    if kind not in UNIT_KINDS:
        raise InvalidInput(
            f"unknown unit kind {kind!r}; choose from {', '.join(UNIT_KINDS)}", field="kind"
        )
    return UnitFilter(
        kind=kind,
        statuses=_statuses(kind, given.get("statuses") or ()),
        workflow=_workflow(given.get("workflow")),
        queue=_queue(given.get("queue")),
        held_on=_held_on(given.get("held_on")),
        older_than=_older_than(given.get("older_than")),
    )


def _statuses(kind: str, statuses: Any) -> tuple[str, ...]:
    if isinstance(statuses, str):
        statuses = (statuses,)
    wanted = tuple(dict.fromkeys(statuses))
    allowed = _STATUSES[kind]
    for status in wanted:
        if status not in allowed:
            raise InvalidInput(
                f"{kind} status {status!r} does not exist; {kind}s are {', '.join(allowed)}",
                field="statuses",
            )
    return wanted


def _workflow(name: Any) -> str | None:
    if name is None:
        return None
    check_text(name, field="workflow", limit=max_length(Run, "workflow_name"))
    known = {workflow.name for workflow in registry.all()}
    if name not in known and not Run.objects.filter(workflow_name=name).exists():
        raise InvalidInput(
            f"no workflow is called {name!r}: none is registered and no run has it",
            field="workflow",
        )
    return name


def _queue(queue: Any) -> str | None:
    if queue is None:
        return None
    check_text(queue, field="queue", limit=max_length(STEP.model, "queue"))
    return queue


def _held_on(held_on: Any) -> str | None:
    if held_on is None:
        return None
    if held_on not in HELD_ON:
        raise InvalidInput(
            f"units cannot be selected by hold {held_on!r}; choose from {', '.join(HELD_ON)}",
            field="held_on",
        )
    return str(held_on)


def _older_than(age: Any) -> timedelta | None:
    if age is None:
        return None
    if not isinstance(age, timedelta):
        raise InvalidInput(
            f"older_than must be a duration (a timedelta), not {age!r}", field="older_than"
        )
    if age < timedelta(0) or age > timedelta(days=100 * 365):
        raise InvalidInput(
            f"older_than must be between 0 and 100 years, not {age}", field="older_than"
        )
    return age


def select_units(units: UnitFilter) -> QuerySet[Any]:
    """The units ``units`` (checked by :func:`unit_filter`) selects, unordered."""
    kind = UNIT_KINDS[units.kind]
    selection = kind.model.objects.all()
    if units.statuses:
        selection = selection.filter(status__in=units.statuses)
    if units.workflow is not None:
        selection = selection.filter(**{f"{kind.run_path}__workflow_name": units.workflow})
    if units.queue is not None:
        selection = selection.filter(queue=units.queue)
    if units.held_on is not None:
        selection = selection.filter(HELD_ON[units.held_on])
    if units.older_than is not None:
        selection = selection.filter(updated_at__lt=timezone.now() - units.older_than)
    return selection


class _Row(NamedTuple):
    """A unit as the bulk reads it: what names it, what the guards judge, what pins it."""

    pk: int
    status: str
    attempt: int  # within its round (a step's), 0 if never started
    round: int | None  # a step's; None for items and compensations
    run: str
    run_status: str
    step: str
    step_kind: str
    item: str


# What is read of a unit, by kind: its run, its run's status, its step's name and node
# kind, its item's key ("" for a step: read as the step's name and dropped).
_OWNERS = {
    STEP.name: ("run_id", "run__status", "name", "kind", "name"),
    ITEM.name: ("step__run_id", "step__run__status", "step__name", "step__kind", "key"),
    COMPENSATION.name: ("run_id", "run__status", "step__name", "step__kind", "item__key"),
}


def _keyset(kind: WorkKind, selection: QuerySet[Any]) -> Iterator[list[_Row]]:
    """The selected units in primary-key order, ``CHUNK_SIZE`` per query."""
    rounds = ("round", "round_attempts_before") if kind is STEP else ()
    columns = ("pk", "status", "attempt", *_OWNERS[kind.name], *rounds)
    rows = selection.order_by("pk").values_list(*columns)
    last: int | None = None
    while True:
        page = list((rows if last is None else rows.filter(pk__gt=last))[:CHUNK_SIZE])
        chunk = [_row(kind, values) for values in page]
        if chunk:
            last = chunk[-1].pk
            yield chunk
        if len(page) < CHUNK_SIZE:
            return


def _row(kind: WorkKind, values: tuple[Any, ...]) -> _Row:
    pk, status, attempt, run, run_status, step, step_kind, item, *rounds = values
    if kind is STEP:
        round_, before = rounds
        return _Row(
            pk, status, max(attempt - before, 0), round_, str(run), run_status, step, step_kind, ""
        )
    return _Row(pk, status, attempt, None, str(run), run_status, step, step_kind, item or "")


@dataclass(frozen=True)
class _UnitVerb:
    """A verb of the bulk over units: its guard and the rule that advises on one unit
    (the engine's own, asked of what was read), the kinds it refuses and why, its
    options, and how it is applied to one unit."""

    guard: StepVerb
    refusal: Callable[[WorkKind, str, str, str], str | None]
    options: frozenset[str]
    apply: Callable[[WorkKind, _Row, dict[str, Any], AnyUser | None], str | None]
    refused_kinds: Mapping[str, str]

    def advice(self, kind: WorkKind, row: _Row) -> str | None:
        """``None`` when the verb would act on ``row``, else why not."""
        return self.refusal(kind, row.status, row.step_kind, row.run_status)


def _retry_refusal(kind: WorkKind, status: str, step_kind: str, run_status: str) -> str | None:
    return RETRY_STEP.refusal(status, run_status, noun=kind.name)


def _revoke(kind: WorkKind, row: _Row, options: dict[str, Any], user: AnyUser | None) -> str | None:
    """Revoke the attempt the bulk read; ``None`` when done, else why not."""
    result = revoke.revoke_lease(
        kind,
        row.pk,
        expected_attempt=max(row.attempt, 1),
        expected_round=row.round,
        reason=options.get("reason", ""),
        user=user,
    )
    if result.revoked:
        return None
    return f"attempt {result.attempt} {not_revoked_text(result)}"


def _fail(kind: WorkKind, row: _Row, options: dict[str, Any], user: AnyUser | None) -> str | None:
    fail.fail_unit(
        kind,
        row.pk,
        expected_attempt=row.attempt,
        expected_round=row.round,
        expected_status=row.status,
        reason=options.get("reason", ""),
        user=user,
    )
    return None


def _retry(kind: WorkKind, row: _Row, options: dict[str, Any], user: AnyUser | None) -> str | None:
    retry_step(row.pk, user=user, expected_round=row.round)
    return None


UNIT_VERBS: dict[str, _UnitVerb] = {
    REVOKE.name: _UnitVerb(REVOKE, revoke.revoke_refusal, frozenset({"reason"}), _revoke, {}),
    FAIL_STEP.name: _UnitVerb(FAIL_STEP, fail.fail_refusal, frozenset({"reason"}), _fail, {}),
    RETRY_STEP.name: _UnitVerb(
        RETRY_STEP,
        _retry_refusal,
        frozenset(),
        _retry,
        {
            ITEM.name: "a failed item runs again with its fan-out step: retry_step that "
            "step (its failed items get fresh attempts)",
            COMPENSATION.name: "a failed compensation runs again with its run: retry the "
            "compensation_failed run",
        },
    ),
}


def iter_bulk_units(
    verb: str,
    units: UnitFilter | Mapping[str, Any],
    *,
    dry_run: bool = True,
    user: AnyUser | None = None,
    **options: Any,
) -> Iterator[UnitItem]:
    """Judge (and unless ``dry_run``, act on) each unit ``units`` selects, one at a time.

    Bad input — an unknown verb or option, a bad filter, a verb that does not apply to
    the kind of unit — raises :class:`InvalidInput` now, before anything is read.
    """
    spec = UNIT_VERBS.get(verb)
    if spec is None:
        raise InvalidInput(
            f"unknown unit verb {verb!r}; choose from {', '.join(UNIT_VERBS)}", verb=verb
        )
    selected = unit_filter(units)
    if selected.kind in spec.refused_kinds:
        raise InvalidInput(
            f"{verb} does not apply to {selected.kind}s: {spec.refused_kinds[selected.kind]}",
            field="kind",
        )
    check_options(verb, options, spec.options)
    kind = UNIT_KINDS[selected.kind]
    chunks = _keyset(kind, select_units(selected))
    return _walk(spec, kind, chunks, options, user, dry_run)


def check_options(verb: str, options: Mapping[str, Any], accepted: frozenset[str]) -> None:
    """:class:`InvalidInput` for an option ``verb`` does not take, or a reason the
    database cannot store: checked once for a whole bulk, before anything is read."""
    unknown = sorted(set(options) - accepted)
    if unknown:
        takes = ", ".join(sorted(accepted)) or "no options"
        raise InvalidInput(f"{verb} takes {takes}; not {', '.join(unknown)}", verb=verb)
    if "reason" in options:
        check_text(options["reason"], field="reason")


def _walk(
    spec: _UnitVerb,
    kind: WorkKind,
    chunks: Iterator[list[_Row]],
    options: dict[str, Any],
    user: AnyUser | None,
    dry_run: bool,
) -> Iterator[UnitItem]:
    for chunk in chunks:
        for row in chunk:
            refusal = spec.advice(kind, row)
            if refusal is not None:
                yield _item(kind, row, SKIPPED, refusal)
            elif dry_run:
                yield _item(kind, row, ELIGIBLE)
            else:
                yield _apply_one(spec, kind, row, options, user)


def _item(kind: WorkKind, row: _Row, outcome: str, reason: str = "", code: str = "") -> UnitItem:
    return UnitItem(
        kind.name,
        row.pk,
        row.run,
        row.step,
        row.item,
        row.status,
        row.attempt,
        outcome,
        reason,
        code,
    )


def _apply_one(
    spec: _UnitVerb, kind: WorkKind, row: _Row, options: dict[str, Any], user: AnyUser | None
) -> UnitItem:
    """Apply the verb to one unit, pinned to what was read of it; its refusal or error is
    this unit's result, not the batch's."""
    try:
        missed = spec.apply(kind, row, options, user)
    except (InvalidTransition, StaleState) as exc:
        return _item(kind, row, SKIPPED, exc.message)
    except WorkflowError as exc:
        return _item(kind, row, FAILED, exc.message, exc.code)
    except PermissionDenied as exc:
        return _item(kind, row, FAILED, str(exc) or "permission denied", "permission_denied")
    if missed is not None:
        return _item(kind, row, SKIPPED, missed)
    status = kind.model.objects.filter(pk=row.pk).values_list("status", flat=True).first()
    return _item(kind, row, DONE)._replace(status=status or row.status)
