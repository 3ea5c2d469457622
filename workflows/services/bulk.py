"""One operator verb over many runs: a dry run that advises, or the verb applied run by run.

``bulk`` is what ``workflows.bulk`` exports and what ``workflows_bulk`` calls. This
module is not named ``workflows/bulk.py``: importing a submodule binds its name on the
package, and ``workflows.bulk`` would then be the module instead of the function.

Nothing here writes workflow state itself. A dry run reads the selection and asks each
verb's guard (:mod:`workflows.engine.guards`) whether the run's status accepts it: that
is advice, since the verb decides again under the run's lock when applied. Applying
calls the verb's service (:mod:`workflows.services`) once per run, each in its own
transaction, so one refused or failing run neither stops the batch nor undoes the runs
done before it. Call it outside a transaction of your own, or every run commits (or
rolls back) with yours.

Memory stays bounded whatever the selection's size: runs are read as (id, status) pairs,
500 at a time, by keyset pagination on the primary key (``pk > last ORDER BY pk``), never
as model instances and never all at once. A keyset, unlike an offset, does not skip
runs that the verb moved out of the selection (a ``--status running`` batch that cancels
as it goes), and visits each run once. The selection is read as the batch goes: a run
that enters it meanwhile is included if its id sorts after the current position.
:func:`iter_bulk` yields per-run results as they happen; :func:`bulk` keeps them, one
small tuple per run, in a :class:`BulkResult` with the totals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils import timezone

from workflows import services
from workflows.definitions.limits import priority_problems
from workflows.engine.guards import RUN_VERBS, RunVerb
from workflows.errors import InvalidInput, InvalidTransition, WorkflowError
from workflows.models import Run, Step
from workflows.services.bulk_outcomes import (
    DONE,
    ELIGIBLE,
    FAILED,
    SKIPPED,
    BulkItem,
    BulkResult,
    UnitItem,
)
from workflows.services.bulk_units import UnitFilter, check_options, iter_bulk_units, unit_filter
from workflows.status import RunStatus
from workflows.validation import check_text, max_length

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = [
    "BULK_RUN_VERBS",
    "CHUNK_SIZE",
    "MAX_IDS",
    "VERB_OPTIONS",
    "BulkItem",
    "BulkResult",
    "UnitFilter",
    "UnitItem",
    "bulk",
    "iter_bulk",
    "select_runs",
]

# Runs read per query. Small enough for any database's limit on bound parameters (an
# id list is read with ``IN``), large enough that the reads cost little next to the verbs.
CHUNK_SIZE = 500
# An id list is held in memory and sent as parameters; larger selections are querysets.
MAX_IDS = 1_000


@dataclass(frozen=True)
class _Service:
    """The service function a run verb calls, by name, and the options it takes."""

    function: str
    options: frozenset[str]


# Looked up by name when a bulk starts, so that a verb whose service this version lacks
# is refused with a clear message before anything is read or written.
_SERVICES: dict[str, _Service] = {
    # request_cancel, not cancel_run: a run cancelled by someone else since it was read
    # is then skipped as cancelled already, not counted as done by this bulk.
    "cancel": _Service("request_cancel", frozenset({"reason", "compensate"})),
    "terminate": _Service("terminate_run", frozenset({"reason"})),
    "pause": _Service("pause_run", frozenset({"reason"})),
    "resume": _Service("resume_run", frozenset()),
    "retry": _Service("retry_run", frozenset()),
    "rerun": _Service("rerun_from", frozenset({"from_step", "reason"})),
    "priority": _Service("change_priority", frozenset({"priority"})),
    "dismiss": _Service("dismiss_run", frozenset()),
    "undismiss": _Service("undismiss_run", frozenset()),
}
# Run verbs that name something of one run alone, so no bulk offers them.
_ONE_RUN_ONLY = {"business_key": "a business key names one run"}
# The run verbs a bulk applies, in the order the surfaces list them.
BULK_RUN_VERBS: tuple[str, ...] = tuple(_SERVICES)
# Every option some verb takes: what a surface reads from its input and passes on when
# given (each verb refuses the ones it does not take).
VERB_OPTIONS: tuple[str, ...] = tuple(
    sorted(frozenset().union(*(spec.options for spec in _SERVICES.values())))
)


def bulk(
    verb: str,
    runs: QuerySet[Run] | Iterable[UUID | str] | None = None,
    *,
    units: UnitFilter | Mapping[str, Any] | None = None,
    dry_run: bool = True,
    user: AnyUser | None = None,
    **options: Any,
) -> BulkResult:
    """Apply run verb ``verb`` to every run of ``runs``, or with ``dry_run`` (the default)
    say which runs it would act on. Returns the totals and one :class:`BulkItem` per run.

    ``runs`` is a ``Run`` queryset (any size) or up to :data:`MAX_IDS` run ids. Options
    are the verb's own: ``reason`` (cancel, terminate, pause, rerun), ``compensate``
    (cancel), ``from_step`` (rerun: the name of the step to run again in every run),
    ``priority`` (priority: the new priority, -1000 to 1000, set through
    :func:`workflows.services.change_priority` as the single verb does).
    Bad input (an unknown verb or option, a malformed id, too many ids) raises
    :class:`InvalidInput` before anything is read or written. Applied, each run is its
    own transaction: a refused run is ``skipped``, and one that raises another
    ``WorkflowError`` or ``PermissionDenied`` is ``failed``; the batch goes on.

    With ``units`` instead of ``runs``, a unit verb (``revoke``, ``fail_step``,
    ``retry_step``) over the steps, fan-out items or compensations the filter selects
    (a :class:`UnitFilter`, or a mapping of its fields: ``kind``, ``statuses``,
    ``workflow``, ``queue``, ``held_on``, ``older_than``), one :class:`UnitItem` per
    unit, each unit fenced as if the verb were applied to it alone
    (:mod:`workflows.services.bulk_units`); ``reason`` is the option of revoke and fail_step.
    """
    if (runs is None) == (units is None):
        raise InvalidInput("give exactly one of runs and units", field="units")
    if units is not None:
        selected = unit_filter(units)
        result = BulkResult(verb=verb, dry_run=dry_run, units=selected.kind)
        for unit in iter_bulk_units(verb, selected, dry_run=dry_run, user=user, **options):
            result.add(unit)
        return result
    assert runs is not None
    result = BulkResult(verb=verb, dry_run=dry_run)
    for item in iter_bulk(verb, runs, dry_run=dry_run, user=user, **options):
        result.add(item)
    return result


def iter_bulk(
    verb: str,
    runs: QuerySet[Run] | Iterable[UUID | str],
    *,
    dry_run: bool = True,
    user: AnyUser | None = None,
    **options: Any,
) -> Iterator[BulkItem]:
    """:func:`bulk` one run at a time: yields each run's result as soon as it is known.

    The input is checked when this is called, not on the first ``next()``; the verb is
    applied to a run only as the iterator reaches it, so stopping early leaves the rest
    untouched.
    """
    guard, apply = _prepare(verb, options, user)
    chunks = _chunks(runs)
    return _walk(guard, chunks, options.get("from_step"), None if dry_run else apply)


def select_runs(
    *,
    statuses: Iterable[str] = (),
    workflow: str | None = None,
    older_than: timedelta | None = None,
    business_key: str | None = None,
) -> QuerySet[Run]:
    """Runs in any of ``statuses``, of ``workflow``, created more than ``older_than``
    ago and with ``business_key``: what the ``workflows_bulk`` filters select.

    A filter left out selects everything on its side; an unknown status is refused with
    :class:`InvalidInput`, since it would silently select nothing.
    """
    selection = Run.objects.all()
    wanted = list(dict.fromkeys(statuses))
    unknown = [status for status in wanted if status not in RunStatus.values]
    if unknown:
        raise InvalidInput(
            f"unknown run status {unknown[0]!r}; choose from {', '.join(RunStatus.values)}"
        )
    if wanted:
        selection = selection.filter(status__in=wanted)
    if workflow is not None:
        selection = selection.filter(workflow_name=workflow)
    if older_than is not None:
        selection = selection.filter(created_at__lt=timezone.now() - older_than)
    if business_key is not None:
        selection = selection.filter(business_key=business_key)
    return selection


def _prepare(
    verb: str, options: dict[str, Any], user: AnyUser | None
) -> tuple[RunVerb, Callable[..., Any]]:
    """Check the verb and its options; return its guard and a function applying it to a run."""
    if verb not in RUN_VERBS:
        raise InvalidInput(
            f"unknown run verb {verb!r}; choose from {', '.join(RUN_VERBS)}", verb=verb
        )
    if verb in _ONE_RUN_ONLY:
        raise InvalidInput(f"{verb} is no bulk verb: {_ONE_RUN_ONLY[verb]}", verb=verb)
    spec = _SERVICES.get(verb)
    function = getattr(services, spec.function, None) if spec else None
    if spec is None or function is None:
        missing = f"workflows.services.{spec.function}()" if spec else "service for it"
        raise InvalidInput(
            f"bulk {verb} is not available: this version has no {missing}", verb=verb
        )
    check_options(verb, options, spec.options)
    if "compensate" in options and not isinstance(options["compensate"], bool):
        raise InvalidInput(f"compensate must be True or False, got {options['compensate']!r}")
    if verb == "priority":
        if "priority" not in options:
            raise InvalidInput("priority needs priority: the new priority, -1000 to 1000")
        # The single verb's check and message (``services.change_priority``), given once
        # for the batch instead of once per run.
        if priority_problems(options["priority"]):
            raise InvalidInput(priority_problems(options["priority"])[0], field="priority")
    if verb == "rerun":
        if not options.get("from_step"):
            raise InvalidInput("rerun needs from_step: the name of the step to run again")
        check_text(options["from_step"], field="from_step", limit=max_length(Step, "name"))
        passed = {name: value for name, value in options.items() if name != "from_step"}

        def apply(run_id: UUID) -> Run:
            return function(run_id, options["from_step"], user=user, **passed)
    else:

        def apply(run_id: UUID) -> Run:
            return function(run_id, user=user, **options)

    return RUN_VERBS[verb], apply


def _chunks(runs: QuerySet[Run] | Iterable[UUID | str]) -> Iterator[list[tuple[str, str]]]:
    """Check ``runs`` now, then return an iterator of its (id, status) pairs, by chunks.

    An id that names no run comes with the status ``""``.
    """
    if isinstance(runs, QuerySet):
        if runs.model is not Run:
            raise InvalidInput(f"runs must be a queryset of Run, not of {runs.model.__name__}")
        # A sliced queryset cannot be filtered further: select its ids as a subquery.
        base = Run.objects.filter(pk__in=runs.values("pk")) if runs.query.is_sliced else runs
        return _keyset(base)
    if isinstance(runs, str | bytes):
        raise InvalidInput("runs must be a queryset or a list of run ids, not one string")
    given = list(islice(runs, MAX_IDS + 1))
    if len(given) > MAX_IDS:
        raise InvalidInput(
            f"more than {MAX_IDS:,} run ids; select that many runs with a queryset",
            limit=MAX_IDS,
        )
    ids = list(dict.fromkeys(_parse_id(value) for value in given))
    return _by_ids(ids)


def _parse_id(value: UUID | str) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise InvalidInput(f"{value!r} is not a run id (run ids are UUIDs)") from None


def _keyset(selection: QuerySet[Run]) -> Iterator[list[tuple[str, str]]]:
    """(id, status) pairs of ``selection`` in primary-key order, ``CHUNK_SIZE`` per query.

    A filter across a relation can repeat a run: repeats are adjacent in this order and
    dropped, and the next chunk starts after the last id seen.
    """
    pairs = selection.order_by("pk").values_list("pk", "status")
    last: UUID | None = None
    while True:
        page = pairs if last is None else pairs.filter(pk__gt=last)
        rows = list(page[:CHUNK_SIZE])
        chunk: list[tuple[str, str]] = []
        for pk, status in rows:
            if pk != last:
                chunk.append((str(pk), status))
                last = pk
        if chunk:
            yield chunk
        if len(rows) < CHUNK_SIZE:
            return


def _by_ids(ids: list[UUID]) -> Iterator[list[tuple[str, str]]]:
    """(id, status) pairs of ``ids`` in the order given, ``CHUNK_SIZE`` ids per query."""
    for start in range(0, len(ids), CHUNK_SIZE):
        part = ids[start : start + CHUNK_SIZE]
        statuses = dict(Run.objects.filter(pk__in=part).values_list("pk", "status"))
        yield [(str(pk), statuses.get(pk, "")) for pk in part]


def _walk(
    guard: RunVerb,
    chunks: Iterator[list[tuple[str, str]]],
    from_step: str | None,
    apply: Callable[[UUID], Any] | None,
) -> Iterator[BulkItem]:
    """Judge (and with ``apply``, act on) each run of each chunk, in order."""
    for chunk in chunks:
        having_step = _runs_with_step(chunk, from_step) if from_step else None
        for run_id, status in chunk:
            refusal = _refusal(guard, status, run_id, having_step, from_step)
            if refusal is not None:
                yield BulkItem(run_id, status, SKIPPED, refusal)
            elif apply is None:
                yield BulkItem(run_id, status, ELIGIBLE)
            else:
                yield _apply_one(apply, run_id, status)


def _runs_with_step(chunk: list[tuple[str, str]], step_name: str) -> set[str]:
    """Which runs of ``chunk`` have a step called ``step_name``: one query per chunk."""
    found = Step.objects.filter(run_id__in=[UUID(run_id) for run_id, _ in chunk], name=step_name)
    return {str(run_id) for run_id in found.values_list("run_id", flat=True)}


def _refusal(
    guard: RunVerb,
    status: str,
    run_id: str,
    having_step: set[str] | None,
    step_name: str | None,
) -> str | None:
    if not status:
        return "no run has this id"
    refusal = guard.refusal(status)
    if refusal is None and having_step is not None and run_id not in having_step:
        return f"run has no step {step_name!r}"
    return refusal


def _apply_one(apply: Callable[[UUID], Any], run_id: str, status: str) -> BulkItem:
    """Apply the verb to one run; its refusal or error is this run's result, not the batch's.

    The verb checks its guard again under the run's lock: a run whose status changed
    since it was read is refused with ``InvalidTransition`` and reported as skipped, and
    so is a run someone else cancelled meanwhile, which a cancel leaves as it is.
    """
    try:
        outcome = apply(UUID(run_id))
    except InvalidTransition as exc:
        return BulkItem(run_id, status, SKIPPED, exc.message)
    except WorkflowError as exc:
        return BulkItem(run_id, status, FAILED, exc.message, exc.code)
    except PermissionDenied as exc:
        return BulkItem(
            run_id, status, FAILED, str(exc) or "permission denied", "permission_denied"
        )
    if isinstance(outcome, services.CancelRequest):
        if outcome.already:
            reason = f"run is {outcome.run.status} already; nothing to do"
            return BulkItem(run_id, outcome.run.status, SKIPPED, reason)
        outcome = outcome.run
    return BulkItem(run_id, outcome.status, DONE)
