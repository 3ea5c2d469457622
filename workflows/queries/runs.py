"""Read side: what operators, the admin and the API show about runs and definitions.

Nothing here writes, and nothing opens a transaction: under SQLite's IMMEDIATE mode
even a read-only ``atomic()`` would take the write lock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_
from typing import Any
from uuid import UUID

from django.db import models
from django.db.models import Case, Q, QuerySet, Value, When
from django.utils import timezone

from workflows.conf import workflow_settings
from workflows.definitions import registry
from workflows.definitions.render import RENDERERS
from workflows.engine.work_kinds import WORK_KINDS, WorkKind
from workflows.errors import RunNotFound, StepNotFound
from workflows.models import Event, Run, Signal, Step, Timer
from workflows.models.runs import FAILING
from workflows.queries.plan_terms import StatusIn
from workflows.queries.tags import tagged
from workflows.status import RUN_ATTENTION_FAILED, RUN_HELD, RunStatus, StepStatus, TimerStatus
from workflows.tags import checked_tags

_SUMMARY_FIELDS = (
    "id",
    "workflow_name",
    "workflow_version",
    "status",
    "business_key",
    "title",
    "trigger",
    "dismissed_at",
    "tags",
    "created_at",
    "updated_at",
)


def run_summary(run: Run) -> dict[str, Any]:
    """Return what identifies a run and says where it stands: one row of a run list."""
    return {
        "id": str(run.pk),
        "workflow": run.workflow_name,
        "version": run.workflow_version,
        "status": run.status,
        "business_key": run.business_key,
        "title": run.title,
        "trigger": run.trigger,
        "dismissed_at": run.dismissed_at,
        "tags": run.tags,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    }


def list_runs(
    *,
    workflow: str | None = None,
    status: RunStatus | str | None = None,
    tags: Mapping[str, str] | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Return summaries of the newest runs, optionally of one workflow, one status and
    carrying every one of ``tags`` (key → value).

    Loads only the summary columns: inputs, outputs and snapshots can be large. A tag
    that is no valid key and value (:mod:`workflows.tags`) is :class:`InvalidInput`
    naming it; it could match no run.
    """
    runs: QuerySet[Run] = Run.objects.only(*_SUMMARY_FIELDS).order_by("-created_at", "-id")
    if workflow:
        runs = runs.filter(workflow_name=workflow)
    if status:
        runs = runs.filter(status=status)
    if tags:
        runs = tagged(runs, checked_tags(tags, field="tags"), [status] if status else ())
    return [run_summary(run) for run in runs[:limit]]


def get_run(run_id: UUID | str, *, runs: QuerySet[Run] | None = None) -> Run:
    """Return the run with this id; raise :class:`RunNotFound` for an unknown or malformed id.

    A malformed id is "not found" too, with its own message: to a caller holding a typo,
    both mean that no such run exists. ``runs`` (default: all runs) lets a caller read
    the row with its own annotations in the same query.
    """
    try:
        pk = run_id if isinstance(run_id, UUID) else UUID(str(run_id))
    except ValueError:
        raise RunNotFound(
            f"{run_id!r} is not a run id (run ids are UUIDs)", run=str(run_id)
        ) from None
    run = (Run.objects.all() if runs is None else runs).filter(pk=pk).first()
    if run is None:
        raise RunNotFound(f"no run has id {pk}", run=str(pk))
    return run


def traceparent_of(run_id: UUID | None) -> str:
    """The W3C ``traceparent`` a run keeps (workflows.tracing); "" for none, or no run."""
    if run_id is None:
        return ""
    return Run.objects.filter(pk=run_id).values_list("traceparent", flat=True).first() or ""


def describe_run(run_id: UUID | str) -> dict[str, Any]:
    """Return a run with its steps and its history (events in order), for inspection.

    Values are JSON-ready except datetimes, left for the caller to format. The three
    reads are not one snapshot: steps of a run moving meanwhile may be a moment newer
    than the run row, which an operator's view can live with.
    """
    run = get_run(run_id)
    steps = list(Step.objects.filter(run_id=run.pk).order_by("id"))
    # Keyed so that an event of the run itself (no step) looks up ``None``.
    step_names: dict[int | None, str] = {step.pk: step.name for step in steps}
    events = Event.objects.filter(run_id=run.pk).order_by("id")
    return {
        **run_summary(run),
        "idempotency_key": run.idempotency_key,
        "parent_run": str(run.parent_run_id) if run.parent_run_id else None,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "deadline": run.deadline,
        "input": run.input,
        "variables": run.variables,
        "output": run.output,
        "error": run.error,
        "steps": [
            {
                "id": step.pk,
                "name": step.name,
                "kind": step.kind,
                "status": step.status,
                "iteration": step.iteration,
                "round": step.round,
                **step.attempts_in_round._asdict(),
                "lease_owner": step.lease_owner,
                "lease_expires_at": step.lease_expires_at,
                "started_at": step.started_at,
                "finished_at": step.finished_at,
                "error": step.error,
                "failure_class": step.failure_class or None,
            }
            for step in steps
        ],
        "events": [
            {
                "id": event.pk,
                "created_at": event.created_at,
                "type": event.type,
                "step": step_names.get(event.step_id),
                "payload": event.payload,
            }
            for event in events
        ],
    }


@dataclass(frozen=True)
class DefinitionReport:
    """One registered workflow version, its size, and what is wrong with it (if anything)."""

    name: str
    version: int
    steps: int
    problems: tuple[str, ...]


def check_definitions() -> list[DefinitionReport]:
    """Validate every registered workflow again, ordered by (name, version).

    Definitions are validated at import, but a handler module can change or vanish
    after that (a deploy that half-landed): this is the check to run before trusting
    the workers with it.
    """
    return [
        DefinitionReport(
            name=workflow.name,
            version=workflow.version,
            steps=len(workflow.nodes),
            problems=tuple(workflow.problems()),
        )
        for workflow in registry.all()
    ]


def render_definition(name: str, *, version: int | None = None, format: str = "mermaid") -> str:
    """Return the graph of a registered workflow (default: its latest version) as source.

    ``format`` is a key of :data:`workflows.definitions.render.RENDERERS`; an unknown
    name or version raises :class:`~workflows.DefinitionMissing`.
    """
    if format not in RENDERERS:
        raise ValueError(f"unknown graph format {format!r}; choose one of {sorted(RENDERERS)}")
    workflow = registry.latest(name) if version is None else registry.get(name, version)
    return RENDERERS[format](workflow)


def get_step(step_id: int | str) -> Step:
    """Return the step with this id; raise :class:`StepNotFound` for an unknown or malformed id.

    The operator verbs take step ids as typed by a person or sent by a client, so a
    malformed id is "not found" with its own message, as in :func:`get_run`.
    """
    try:
        pk = int(step_id)
    except (TypeError, ValueError):
        raise StepNotFound(
            f"{step_id!r} is not a step id (step ids are integers)", step=str(step_id)
        ) from None
    step = Step.objects.filter(pk=pk).first()
    if step is None:
        raise StepNotFound(f"no step has id {pk}", step=pk)
    return step


def step_summary(step: Step) -> dict[str, Any]:
    """Return where a step stands and who decided it: what a verb acting on a step reports.

    ``decided_by`` is the decider's username (one more query for a decided gate), so that
    the caller need not load the user to say who it was.
    """
    return {
        "id": step.pk,
        "run": str(step.run_id),
        "name": step.name,
        "kind": step.kind,
        "status": step.status,
        **step.attempts_in_round._asdict(),
        "decision": step.decision,
        "decided_by": step.decided_by.get_username() if step.decided_by is not None else None,
        "decided_via": step.decided_via,
        "output": step.output,
        "error": step.error,
        "finished_at": step.finished_at,
        "updated_at": step.updated_at,
    }


def signal_summary(signal: Signal) -> dict[str, Any]:
    """Return a signal and the step that consumed it (by name, as run histories name steps).

    ``consumed_by`` is ``None`` while the signal waits for a ``WaitForSignal`` step.
    """
    consumer = (
        Step.objects.filter(pk=signal.consumed_by_id).values_list("name", flat=True).first()
        if signal.consumed_by_id
        else None
    )
    return {
        "id": signal.pk,
        "run": str(signal.run_id),
        "name": signal.name,
        "payload": signal.payload,
        "idempotency_key": signal.idempotency_key,
        "received_at": signal.received_at,
        "consumed_by": consumer,
    }


class Attention(models.TextChoices):
    """Whether a run needs an operator, and why; declared in order of priority.

    A run has exactly one class: the first whose condition holds. The conditions are
    built once, in :func:`_attention_conditions`, from the row predicates below, so
    ``explain`` and the SQL filter of a runs list cannot disagree.
    """

    COMPENSATION_FAILED = "compensation_failed"
    FAILED = "failed"
    LEASE_EXPIRED = "lease_expired"
    OVERDUE = "overdue"
    UNDISPATCHED = "undispatched"
    OK = "ok"


def expired_lease(now: datetime) -> Q:
    """Running work (a step, item or compensation) whose lease ran out and that no
    scanner has reclaimed yet: its worker died or hangs, or no sweeper is running.

    A fan-out step is ``running`` without a lease, so it never matches.
    """
    return Q(status=StepStatus.RUNNING, lease_expires_at__lt=now)


def undispatched_unit(kind: WorkKind, now: datetime) -> Q:
    """Ready work of ``kind`` that nobody claimed within ``ATTENTION_UNDISPATCHED_GRACE``.

    A paused run's ready work waits for its resume on purpose, and work a limit holds
    (``held_on``) for its limit, so neither counts.
    """
    cutoff = now - workflow_settings.ATTENTION_UNDISPATCHED_GRACE
    return Q(status=StepStatus.READY, updated_at__lt=cutoff, held_on="") & ~Q(
        **{f"{kind.run_path}__status__in": RUN_HELD}
    )


def overdue_timer(now: datetime) -> Q:
    """A scheduled timer more than ``ATTENTION_OVERDUE_GRACE`` past due: nothing fires
    timers (no sweeper, no scheduler), or the run is held by a stuck transaction.

    A paused run's timers wait, scheduled, for its resume on purpose, so they do not count.
    """
    cutoff = now - workflow_settings.ATTENTION_OVERDUE_GRACE
    return Q(status=TimerStatus.SCHEDULED, due_at__lt=cutoff) & ~Q(run__status__in=RUN_HELD)


def _any_unit(predicate: Callable[[WorkKind], Q]) -> Q:
    """True for a run with at least one unit of work, of any kind, matching ``predicate``.

    ``id IN (the matching units' runs)`` rather than a correlated ``EXISTS`` per run:
    the matching units are few and their predicates read partial indexes, so the
    database reads them once and tests each run against that set, where ``EXISTS``
    probes the unit tables once per run (seconds over 100,000 runs for the ``ok``
    class, which negates every condition, and for an API list of a class no run is in).
    The runs' id column is never NULL, so ``NOT IN`` means what ``NOT EXISTS`` meant.
    """
    first, *others = (
        kind.model.objects.filter(predicate(kind)).order_by().values(kind.run_path)
        for kind in WORK_KINDS
    )
    # One set (a UNION ALL), not an OR of one per kind: PostgreSQL joins a single IN
    # set to the runs' primary key, where an OR of them filters every run in turn.
    return Q(pk__in=first.union(*others, all=True))


def _attention_conditions(now: datetime) -> dict[Attention, Q]:
    """Each class's own condition on a run, before priority is applied.

    ``failed`` leaves out runs an operator terminated on purpose: their error is the
    termination itself (code ``terminated``), which is a decision already taken, unless
    the run was failing when it was terminated (the termination keeps that ``cause``).
    Neither ended class counts a run an operator dismissed (``dismiss_run``); the live
    classes never meet one, since only ended runs are dismissed.
    """
    # A dismissed run (only ended ones are) was seen to by an operator: a decision
    # taken, as a termination is (workflows.engine.verbs.dismiss).
    shown = Q(dismissed_at__isnull=True)
    return {
        Attention.COMPENSATION_FAILED: Q(status=RunStatus.COMPENSATION_FAILED) & shown,
        # The condition of the partial index workflows_run_failing (FAILING, written once
        # in models/runs.py), which PostgreSQL counts the class from; and the statuses
        # written out as the SQLite index of these runs in creation order says them
        # (``workflows_run_failed_created``), so that a page of them newest first reads
        # that index in order and stops after the page: as an ``OR`` of two statuses
        # alone, SQLite read every failed run and sorted them.
        Attention.FAILED: FAILING & shown & Q(StatusIn(RUN_ATTENTION_FAILED)),
        Attention.LEASE_EXPIRED: _any_unit(lambda kind: expired_lease(now)),
        Attention.OVERDUE: Q(
            pk__in=Timer.objects.filter(overdue_timer(now)).order_by().values("run_id")
        ),
        Attention.UNDISPATCHED: _any_unit(lambda kind: undispatched_unit(kind, now)),
    }


def attention_of(now: datetime | None = None) -> Case:
    """An expression giving a run's :class:`Attention` class, to ``annotate()`` runs with.

    ``now`` defaults to this host's clock (the clock the redispatch cut-off uses too).
    """
    conditions = _attention_conditions(now or timezone.now())
    return Case(
        *(When(condition, then=Value(str(kind))) for kind, condition in conditions.items()),
        default=Value(str(Attention.OK)),
        output_field=models.CharField(),
    )


def runs_needing_attention(
    attention: Attention | str,
    *,
    now: datetime | None = None,
    runs: QuerySet[Run] | None = None,
) -> QuerySet[Run]:
    """The runs (of ``runs``, default all) whose :class:`Attention` class is ``attention``.

    Filters in SQL: a class's own condition and the negation of every class before it,
    so the database can start from the few rows that match (overdue timers, expired
    leases) instead of classifying every run. Agrees with :func:`attention_of`.
    """
    try:
        wanted = Attention(attention)
    except ValueError:
        raise ValueError(
            f"unknown attention class {attention!r}; choose one of {Attention.values}"
        ) from None
    conditions = _attention_conditions(now or timezone.now())
    if wanted == Attention.OK:
        matches = ~reduce(or_, conditions.values())
    else:
        matches = conditions[wanted]
        for earlier in list(conditions)[: list(conditions).index(wanted)]:
            matches &= ~conditions[earlier]
    return (Run.objects.all() if runs is None else runs).filter(matches)


def dismissed_filter(runs: QuerySet[Run], value: str) -> QuerySet[Run]:
    """``runs`` as the ``dismissed`` filter's ``value`` (no, yes, all) selects them: what
    the API's list and the console's runs list both use."""
    if value == "yes":
        return runs.filter(dismissed_at__isnull=False)
    if value == "all":
        return runs
    return runs.filter(dismissed_at__isnull=True)
