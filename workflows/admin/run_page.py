"""The run page of the operator console: the story of one run, in a fixed number of queries.

What the page reads, each once for the whole run: the run (with its parent), its
explanation (:func:`workflows.explain`, :data:`~workflows.queries.explain.QUERIES`
queries), its steps, timers, compensations, signals, child runs and one page of its
history. Lists that grow with a run's size (timers and compensations of a large
fan-out, child runs, events) are cut at a limit or paginated, and fan-out items are
only counted (the step's counters) with a link to the filtered item list, so a run of
ten thousand items costs what a run of three does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from workflows.admin.graph import graph_steps, label, step_graph_svg
from workflows.admin.live.progress import live_steps
from workflows.admin.live.regions import (
    POLL_INTERVAL_MS,
    RUN_REGIONS,
    region_templates,
    run_fingerprint,
)
from workflows.admin.offers import run_offers
from workflows.admin.runs import badge, duration, pretty
from workflows.admin.tags import tag_chips
from workflows.conf import workflow_settings
from workflows.definitions import Gate, WaitForSignal
from workflows.definitions.limits import Route
from workflows.holds import HoldKind, describe
from workflows.models import CompensationRecord, Event, Run, Signal, Step, Timer
from workflows.queries.explain import Explanation, WaitingOn, explain
from workflows.queries.iterations import Iteration, earlier_iterations
from workflows.queries.rounds import Round, as_round, ended_rounds
from workflows.queries.variables import last_writers
from workflows.status import (
    RUN_FINAL,
    STEP_FINAL,
    DecisionVia,
    RunStatus,
    StepStatus,
    attempt_in_round,
)
from workflows.text import relative
from workflows.tracing import trace_id_of

__all__ = [
    "EVENTS_PER_PAGE",
    "FAILURE_EVENTS",
    "LIST_LIMIT",
    "PAGE_RELATED",
    "hold_text",
    "run_page_context",
    "run_regions_context",
    "run_steps",
]

EVENTS_PER_PAGE = 50
# Timers, compensations, signals and child runs shown; a fan-out of thousands has more,
# which their own admin lists show in full.
LIST_LIMIT = 50
# History entries the failed-only filter keeps: failures, timeouts and lost leases.
FAILURE_EVENTS = Q(type__endswith="failed") | Q(
    type__in=("step.timed_out", "lease.expired", "lease.lost")
)
# Run statuses the page marks as needing a look even when no one acts on them.
ALARMING = frozenset(
    {
        RunStatus.FAILED,
        RunStatus.COMPENSATION_FAILED,
        RunStatus.COMPENSATED,
        RunStatus.TERMINATED,
    }
)


def trace_link(traceparent: str) -> dict[str, str] | None:
    """The run's trace id, and its address in the project's trace viewer when
    ``WORKFLOWS["TRACE_URL"]`` names one; ``None`` for a run whose start was not traced."""
    trace_id = trace_id_of(traceparent)
    if not trace_id:
        return None
    template = workflow_settings.TRACE_URL
    return {"id": trace_id, "url": template.format(trace_id=trace_id) if template else ""}


def _deadline_when(run: Run, explanation: Explanation, now: datetime) -> str:
    """The deadline in words beside its moment: how long is left, or that it passed; for
    a run that ended, whether the deadline ended it."""
    if explanation.deadline is None:
        return ""
    if run.status in RUN_FINAL:
        exceeded = (run.error or {}).get("code") == "deadline_exceeded"
        return "exceeded: the run failed by it" if exceeded else "the run ended before it"
    moment = relative(explanation.deadline, now)
    return moment if explanation.deadline > now else f"passed {moment}"


def hold_text(entry: WaitingOn, now: datetime) -> str:
    """What holds the run, as one sentence for a person (the :data:`~workflows.holds.HOLDS`
    table words every kind)."""
    return describe(entry.kind, entry.step, entry.details, now)


# Characters of an earlier iteration's output the steps table shows.
OUTPUT_CHARS = 300


@dataclass(frozen=True)
class EarlierIteration:
    """A finished iteration as the steps table shows it: its output cut short."""

    iteration: Iteration
    output: str | None


def _earlier(found: list[Iteration]) -> tuple[EarlierIteration, ...]:
    return tuple(
        EarlierIteration(
            iteration=i,
            output=label(pretty(i.output), OUTPUT_CHARS) if i.output is not None else None,
        )
        for i in found
    )


@dataclass(frozen=True)
class StepRow:
    """One line of the steps table: the step, its duration and its bar on the timeline.

    ``last_failure``: the failure class of its last attempt when that attempt failed
    (the step failed, or waits for its retry), shown as a badge beside its status.
    ``summary``: its summary document (``ctx.summary``) as JSON, when it has one;
    ``log_url``: its Log page, once it has written frames or while it runs;
    ``earlier``: the iterations before its current one, when a loop ran it again;
    ``attempts``: its attempts as the table shows them (``None``: none made), of its
    current iteration only when a loop ran it again (attempts count on across
    iterations, each with a fresh budget); ``route``: where an external step's work is
    claimed from (``external queue 'labels'``), beside its kind.
    """

    step: Step
    duration: str
    bar_start: float
    bar_width: float
    output: str | None
    items_url: str | None
    last_failure: str | None = None
    summary: str | None = None
    log_url: str | None = None
    earlier: tuple[EarlierIteration, ...] = ()
    attempts: str | None = None
    rounds: tuple[EndedRound, ...] = ()
    route: str | None = None


def _attempts(step: Step) -> str | None:
    """``made of allowed`` for the step's current round (:func:`attempt_in_round`):
    the attempts since a rerun, a retry or a loop's next iteration reset it, against
    the budget its reset gave it."""
    attempts = attempt_in_round(step.attempt, step.max_attempts, step.round_attempts_before)
    return str(attempts) if attempts.attempt > 0 else None


def _bar(step: Step, origin: datetime, span: float, now: datetime) -> tuple[float, float]:
    """Where the step's bar starts and how wide it is, in percent of the run's span."""
    if step.started_at is None or span <= 0:
        return 0.0, 0.0
    end = step.finished_at or (now if step.status not in STEP_FINAL else step.updated_at)
    start = (step.started_at - origin).total_seconds() / span * 100
    width = max((end - step.started_at).total_seconds() / span * 100, 0.6)
    return round(min(start, 99.4), 2), round(min(width, 100 - min(start, 99.4)), 2)


def _step_rows(
    run: Run,
    steps: list[Step],
    now: datetime,
    items_url: Callable[[Step], str | None],
    log_url: Callable[[Step], str | None],
) -> list[StepRow]:
    iterations = earlier_iterations(steps)
    rounds = _ended_rounds(steps)
    origin = run.started_at or run.created_at
    end = run.finished_at or now
    span = (end - origin).total_seconds()
    rows = []
    for step in sorted(steps, key=lambda s: (s.started_at is None, s.started_at or now, s.pk)):
        start, width = _bar(step, origin, span, now)
        rows.append(
            StepRow(
                step=step,
                duration=duration(step.started_at, step.finished_at, now),
                bar_start=start,
                bar_width=width,
                output=pretty(step.output) if step.output is not None else None,
                items_url=items_url(step) if step.items_total else None,
                last_failure=step.failure_class
                if step.status in (StepStatus.FAILED, StepStatus.RETRY_SCHEDULED)
                else None,
                summary=pretty(step.summary) if step.summary else None,
                log_url=log_url(step),
                earlier=_earlier(iterations.get(step.pk, [])),
                attempts=_attempts(step),
                rounds=tuple(rounds.get(step.pk, ())),
                route=_external_route(step),
            )
        )
    return rows


def _external_route(step: Step) -> str | None:
    """Where outside workers claim an external step from; ``None`` for any other step."""
    route = Route.of_row(step.queue, step.requires)
    return str(route) if route.external else None


@dataclass(frozen=True)
class EndedRound:
    """A round of a step before a rerun, a retry or a loop's next iteration reset it,
    as the steps table lists it: its attempts numbered within it, its telemetry."""

    round: Round
    attempts: str
    summary: str | None


def _ended_rounds(steps: list[Step]) -> dict[int, list[EndedRound]]:
    """The ended rounds of ``steps`` (step id → oldest first), in one query; only steps
    past their first round are asked about, so a run never reset costs no query."""
    reset = [step.pk for step in steps if step.round > 1]
    found: dict[int, list[EndedRound]] = {}
    if not reset:
        return found
    for row in ended_rounds(reset):
        kept = as_round(row)
        found.setdefault(row.step_id, []).append(
            EndedRound(
                round=kept,
                attempts=f"{kept.attempt} of {kept.max_attempts}",
                summary=pretty(kept.summary) if kept.summary else None,
            )
        )
    return found


@dataclass(frozen=True)
class StepError:
    """A step's last error, with the attempt that raised it.

    The error is kept after a later attempt succeeds, so the step's current attempt is
    not the one that failed: the page names the failed attempt (stored with the error)
    and says that a later one succeeded.
    """

    step: Step
    attempt: int
    succeeded_later: bool


def step_errors(steps: list[Step]) -> list[StepError]:
    """The errors of the steps that have one, each with the attempt that raised it."""
    found = []
    for step in steps:
        if not step.error:
            continue
        raised_by = step.error.get("attempt") if isinstance(step.error, dict) else None
        attempt = raised_by if isinstance(raised_by, int) else step.attempt
        later = step.status == StepStatus.COMPLETED and attempt < step.attempt
        # Numbered within the round, as the steps table numbers the step's attempts.
        shown = attempt_in_round(attempt, attempt, step.round_attempts_before).attempt
        found.append(StepError(step=step, attempt=shown or attempt, succeeded_later=later))
    return found


def _graph_states(steps: list[Step]) -> dict[str, tuple[str, str]]:
    """Each step's status and the short detail its node shows (items, or the attempt
    of a step no loop ran again).

    A gate skipped outside its rule is drawn as ``override``, never as an ordinary
    completion."""
    states = {}
    for step in steps:
        if step.decided_via == DecisionVia.OVERRIDE:
            states[step.name] = (DecisionVia.OVERRIDE.value, "")
            continue
        if step.items_total:
            detail = f"{step.items_completed + step.items_skipped}/{step.items_total}"
        elif (
            attempts := attempt_in_round(
                step.attempt, step.max_attempts, step.round_attempts_before
            )
        ).attempt > 1:
            detail = f"try {attempts.attempt}/{attempts.max_attempts}"
        else:
            detail = ""
        states[step.name] = (step.status, detail)
    return states


def _events(run: Run, request: HttpRequest, step_names: Mapping[int | None, str]) -> dict[str, Any]:
    """One page of the history, newest first, without a count: it fetches one row more
    than it shows to know whether an older page exists."""
    failed_only = request.GET.get("events") == "failed"
    try:
        page = max(int(request.GET.get("events_page", "1")), 1)
    except ValueError:
        page = 1
    events: QuerySet[Event] = Event.objects.filter(run_id=run.pk)
    if failed_only:
        events = events.filter(FAILURE_EVENTS)
    start = (page - 1) * EVENTS_PER_PAGE
    rows = list(events.order_by("-id")[start : start + EVENTS_PER_PAGE + 1])
    return {
        "events": [
            (event, pretty(event.payload), step_names.get(event.step_id))
            for event in rows[:EVENTS_PER_PAGE]
        ],
        "events_failed_only": failed_only,
        "events_page": page,
        "events_newer": page - 1 if page > 1 else None,
        "events_older": page + 1 if len(rows) > EVENTS_PER_PAGE else None,
    }


def subject_link(request: HttpRequest, run: Run, admin_name: str) -> dict[str, Any] | None:
    """The host's object the run is about: its model and key, and the link to its admin
    change page when that admin registers the model and the user may view it.

    The object itself is not loaded (the content type comes from Django's cache), so
    the page's query count does not depend on the subject.
    """
    if run.subject_type_id is None:
        return None
    subject_type = ContentType.objects.get_for_id(run.subject_type_id)
    label = f"{subject_type.name} {run.subject_id}"
    if not request.user.has_perm(f"{subject_type.app_label}.view_{subject_type.model}"):
        return {"label": label, "url": None}
    try:
        url = reverse(
            f"{admin_name}:{subject_type.app_label}_{subject_type.model}_change",
            args=[run.subject_id],
        )
    except NoReverseMatch:
        url = None
    return {"label": label, "url": url}


@dataclass(frozen=True)
class _StepLinks:
    """The links a step's row offers: its fan-out items (for those who may view them)
    and its log (once it wrote a frame, or while it runs)."""

    run: Run
    admin_name: str
    may: Mapping[str, bool]

    def items(self, step: Step) -> str | None:
        if not self.may.get("view_items"):
            return None
        base = reverse(f"{self.admin_name}:workflows_fanoutitem_changelist")
        return f"{base}?step__id__exact={step.pk}"

    def log(self, step: Step) -> str | None:
        if not step.frames_written and step.status != StepStatus.RUNNING:
            return None
        return reverse(f"{self.admin_name}:workflows_step_log", args=[self.run.pk, step.pk])


# What the run page reads along with its run: the links and facts of its head.
PAGE_RELATED = (
    "parent_run",
    "parent_step",
    "created_by",
    "dismissed_by",
    "flow",
    "flow_member",
    "schedule",
)


def run_steps(run: Run) -> list[Step]:
    """The run's steps as the page shows them, oldest first (one query)."""
    return list(
        Step.objects.filter(run_id=run.pk).select_related("decided_by", "claimed_by").order_by("id")
    )


def run_page_context(
    request: HttpRequest, run: Run, admin_name: str, may: Mapping[str, bool]
) -> dict[str, Any]:
    """Everything the run page template shows about ``run`` (loaded with
    :data:`PAGE_RELATED`): its live regions (:func:`run_regions_context`), then the
    lists and the history, which stay as rendered.

    ``may`` says which links to offer: ``operate`` (verbs), ``view_items``,
    ``view_events`` (the per-model admin lists).
    """
    steps = run_steps(run)
    # Keyed so that an event, timer or signal naming no step looks up ``None``.
    step_names: dict[int | None, str] = {step.pk: step.name for step in steps}
    return {
        **run_regions_context(request, run, admin_name, may, steps),
        **_lists(run, step_names, admin_name),
        **_events(run, request, step_names),
    }


def _stopping(explanation: Explanation, now: datetime) -> dict[str, str]:
    """What a cancelling run says about each step it asked to stop: the step's lease
    hold, which says when the cancel came and when the step will notice it."""
    return {
        entry.step: hold_text(entry, now)
        for entry in explanation.waiting_on
        if entry.kind == HoldKind.LEASE and entry.step and entry.details.get("cancel_requested_at")
    }


def run_regions_context(
    request: HttpRequest,
    run: Run,
    admin_name: str,
    may: Mapping[str, bool],
    steps: list[Step],
) -> dict[str, Any]:
    """What the page's live regions (:data:`~workflows.admin.live.regions.RUN_REGIONS`)
    show, read as the page reads it: the page renders them with it, and so does the
    live endpoint (:mod:`workflows.admin.live.pages`) while the run goes on."""
    now = timezone.now()
    explanation = explain(run, now=now)
    links = _StepLinks(run, admin_name, may)
    final = run.status in RUN_FINAL
    allowed, refused = run_offers(
        request.user,
        run,
        explanation.allowed_actions,
        {step.pk: step for step in steps if step.kind == Gate.kind},
        admin_name,
        may_signal=not final
        and any(step.kind == WaitForSignal.kind or step.awaiting is not None for step in steps),
    )
    return {
        "run": run,
        "may": may,
        "subject": subject_link(request, run, admin_name),
        "now": now,
        "badge": badge(run.status),
        "alarming": run.status in ALARMING,
        "final": final,
        "duration": duration(run.started_at, run.finished_at, now),
        "deadline": explanation.deadline,
        "deadline_when": _deadline_when(run, explanation, now),
        "trace": trace_link(run.traceparent),
        "explanation": explanation,
        "attention": explanation.attention,
        "holds": [hold_text(entry, now) for entry in explanation.waiting_on],
        "allowed_actions": allowed,
        "refused_actions": refused,
        "graph": step_graph_svg(
            graph_steps(
                run.snapshot, _graph_states(steps), {step.name: step.iteration for step in steps}
            ),
            title=f"Steps of {run.workflow_name} v{run.workflow_version} and their states",
        ),
        "step_rows": _step_rows(run, steps, now, links.items, links.log),
        "live": live_steps(steps, links.log, _stopping(explanation, now)),
        "errors": step_errors(steps),
        "run_error": pretty(run.error) if run.error else None,
        "input": pretty(run.input),
        "output": pretty(run.output) if run.output is not None else None,
        "variables": _variables(run),
        "tags": tag_chips(run.tags, list_url=reverse(f"{admin_name}:workflows_run_changelist")),
        "fanouts": [
            {
                "step": step,
                "done": step.items_completed + step.items_skipped,
                "url": links.items(step),
            }
            for step in steps
            if step.items_total
        ],
        "live_regions": region_templates("run", RUN_REGIONS),
        "live_url": None if final else reverse(f"{admin_name}:workflows_run_live", args=[run.pk]),
        "live_interval": POLL_INTERVAL_MS,
        "fingerprint": run_fingerprint(
            run.version, run.status, len(steps), sum(step.version for step in steps)
        ),
    }


def _variables(run: Run) -> dict[str, Any]:
    """The run's variables as the page shows them: the whole object, and each variable
    with its value and the step (and attempt) that last wrote it, from the history."""
    writers = last_writers(run.pk, run.variables)
    return {
        "all": pretty(run.variables) if run.variables else None,
        "rows": [(name, pretty(value), writers.get(name)) for name, value in run.variables.items()],
    }


def _lists(run: Run, step_names: Mapping[int | None, str], admin_name: str) -> dict[str, Any]:
    """The run's timers, compensations, signals and child runs, each cut at
    :data:`LIST_LIMIT` (their own admin lists show them all)."""
    timers = (
        Timer.objects.filter(run_id=run.pk)
        .select_related("item")
        .order_by("-status", "due_at")[:LIST_LIMIT]
    )
    signals = Signal.objects.filter(run_id=run.pk).order_by("received_at", "id")[:LIST_LIMIT]
    children = list(
        Run.objects.filter(parent_run_id=run.pk)
        .only("id", "workflow_name", "workflow_version", "status", "business_key", "parent_step_id")
        .order_by("created_at", "id")[: LIST_LIMIT + 1]
    )
    return {
        "timers": [(timer, step_names.get(timer.step_id)) for timer in timers],
        "compensations": list(
            CompensationRecord.objects.filter(run_id=run.pk)
            .select_related("step", "item")
            .order_by("-sequence")[:LIST_LIMIT]
        ),
        "signals": [
            (signal, pretty(signal.payload), step_names.get(signal.consumed_by_id))
            for signal in signals
        ],
        "children": children[:LIST_LIMIT],
        "more_children": len(children) > LIST_LIMIT,
        "children_url": reverse(f"{admin_name}:workflows_run_changelist")
        + f"?parent_run__id__exact={run.pk}",
        "list_limit": LIST_LIMIT,
    }
