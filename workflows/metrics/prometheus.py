"""Prometheus metrics read from the database at scrape time.

Web processes, workers and the sweeper all write the same tables, so counting in the
database is the one way every process's work shows up in one scrape; in-process
counters would show only what the scraped process did. Each scrape runs
:data:`SCRAPE_QUERIES` statements, however many runs there are.

Counters come from the rows and the event history, so they fall back when the purge
scanner deletes old runs: Prometheus treats a falling counter as a reset. Histograms
cover only the last ``WORKFLOWS["METRICS_WINDOW"]`` (steps finished, attempts started,
timers and schedules' slots fired in that window), bucketed in SQL, so a scrape stays
cheap on a long history. Labels are ``workflow``, ``step`` and small enumerations, never a run id.
"""

from __future__ import annotations

import hmac
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    BigIntegerField,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    Field,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.expressions import Combinable
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from workflows.conf import workflow_settings
from workflows.definitions import Gate, Task
from workflows.models import Event, Flow, Run, Schedule, Step, Timer
from workflows.permissions import VIEW_METRICS
from workflows.queries.consumers import consumer_lags
from workflows.status import (
    RUN_FINAL,
    FailureClass,
    FlowStatus,
    RunStatus,
    StepStatus,
    TimerStatus,
)

# Upper bounds (seconds) of the histogram buckets: from a chained claim's milliseconds
# to a step that runs for an hour.
BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)

# How an attempt of a task step ended, by the event that says so.
ATTEMPT_OUTCOMES: dict[str, str] = {
    "step.started": "started",
    "step.completed": "completed",
    "step.retry_scheduled": "retry_scheduled",
    "step.failed": "failed",
    "lease.expired": "lease_expired",
    # The handler returned ``Await``: the attempt ended without using one up.
    "step.awaiting": "awaited",
}

# The events that record a failed attempt of leased work, each attempt once: its retry
# or its final failure (a step, an item, a compensation), its reclaim or its revoke. A
# final failure after a reclaim or a revoke is counted by its ``lease.*`` event.
FAILED_ATTEMPT_EVENTS: frozenset[str] = frozenset(
    {
        f"{kind}.{outcome}"
        for kind in ("step", "item", "compensation")
        for outcome in ("retry_scheduled", "failed")
    }
    | {"lease.expired", "lease.revoked"}
)
_COUNTED_BY_LEASE_EVENT = (FailureClass.LEASE_EXPIRED, FailureClass.REVOKED)

# Runs by status (blocked flow members among them), flows by status, attempts by
# outcome, failed attempts by class, expired leases, waiting gates, stale progress,
# consumer lag, schedules' slots, four histograms.
SCRAPE_QUERIES = 13


class DatabaseCollector:
    """Builds every ``flowsite_*`` metric from the database each time it is collected."""

    def describe(self) -> list[Metric]:
        """Nothing: registering must not query the database (at import, maybe pre-migrate)."""
        return []

    def collect(self) -> Iterator[Metric]:
        yield from self._runs()
        yield self._flows()
        yield from self._attempts()
        yield self._failed_attempts()
        yield self._leases_expired()
        yield self._gates_waiting()
        yield _progress_stale(timezone.now() - workflow_settings.PROGRESS_STALE_AFTER)
        yield _consumer_lag()
        yield from _schedule_slots()
        since = timezone.now() - workflow_settings.METRICS_WINDOW
        yield _histogram(
            "flowsite_step_duration_seconds",
            "Duration of steps finished within METRICS_WINDOW (finished_at - started_at).",
            Step.objects.filter(finished_at__gte=since, started_at__isnull=False),
            {"workflow": "run__workflow_name", "step": "name"},
            F("finished_at") - F("started_at"),
        )
        yield _histogram(
            "flowsite_step_schedule_to_start_seconds",
            "Time from a task step's latest step.ready event to its step.started event, for "
            "attempts started within METRICS_WINDOW (0 for a step claimed in the transition "
            "that released it).",
            Event.objects.filter(type="step.started", created_at__gte=since).annotate(
                ready_at=Coalesce(_latest_ready_before(), F("created_at"))
            ),
            {"workflow": "run__workflow_name", "step": "step__name"},
            F("created_at") - F("ready_at"),
        )
        yield _histogram(
            "flowsite_timer_lateness_seconds",
            "How late timers fired within METRICS_WINDOW fired (fired_at - due_at).",
            Timer.objects.filter(status=TimerStatus.FIRED, fired_at__gte=since),
            {"workflow": "run__workflow_name"},
            F("fired_at") - F("due_at"),
        )
        yield _histogram(
            "flowsite_schedule_lateness_seconds",
            "How late schedules' slots fired within METRICS_WINDOW started their runs (the "
            "late_ms of schedule.fired: from the slot's instant to the start).",
            Event.objects.filter(
                type="schedule.fired",
                created_at__gte=since,
                schedule__isnull=False,
                payload__late_ms__isnull=False,
            ),
            {"workflow": "schedule__workflow_name", "schedule": "schedule__key"},
            Cast(KeyTextTransform("late_ms", "payload"), BigIntegerField()),
            milliseconds=True,
        )

    def _runs(self) -> Iterator[Metric]:
        started = CounterMetricFamily(
            "flowsite_runs_started_total",
            "Runs started (rows in the runs table).",
            labels=["workflow"],
        )
        finished = CounterMetricFamily(
            "flowsite_runs_finished_total",
            "Runs that reached a final status, by that status.",
            labels=["workflow", "status"],
        )
        active = GaugeMetricFamily(
            "flowsite_runs_active", "Runs not yet in a final status.", labels=["workflow", "status"]
        )
        # Only a flow's members are ever blocked: read from the same rows, no query of its own.
        blocked = GaugeMetricFamily(
            "flowsite_flow_members_blocked",
            "Flow members whose run waits blocked for its upstream members (its join).",
            labels=["workflow"],
        )
        per_workflow: dict[str, int] = {}
        rows = Run.objects.order_by().values_list("workflow_name", "status").annotate(n=Count("id"))
        for workflow, status, count in rows:
            per_workflow[workflow] = per_workflow.get(workflow, 0) + count
            (finished if status in RUN_FINAL else active).add_metric([workflow, status], count)
            if status == RunStatus.BLOCKED:
                blocked.add_metric([workflow], count)
        for workflow, count in sorted(per_workflow.items()):
            started.add_metric([workflow], count)
        yield from (started, finished, active, blocked)

    def _flows(self) -> Metric:
        flows = GaugeMetricFamily(
            "flowsite_flows",
            "Flows by status (every status, 0 included: a flow moves from one to the next).",
            labels=["status"],
        )
        counts = dict(Flow.objects.order_by().values_list("status").annotate(n=Count("id")))
        for status in FlowStatus.values:
            flows.add_metric([status], counts.get(status, 0))
        return flows

    def _attempts(self) -> Iterator[Metric]:
        attempts = CounterMetricFamily(
            "flowsite_step_attempts_total",
            "Attempts of task steps: 'started' counts attempts begun, the other outcomes "
            "how they ended.",
            labels=["workflow", "step", "outcome"],
        )
        rows = (
            # lease.expired of a compensation names the compensated step: not its attempt.
            Event.objects.filter(type__in=ATTEMPT_OUTCOMES, step__kind=Task.kind)
            .filter(~Q(type="lease.expired") | Q(payload__kind="step"))
            .order_by()
            .values_list("run__workflow_name", "step__name", "type")
            .annotate(n=Count("id"))
        )
        for workflow, step, event_type, count in rows:
            attempts.add_metric([workflow, step, ATTEMPT_OUTCOMES[event_type]], count)
        yield attempts

    def _failed_attempts(self) -> Metric:
        failed = CounterMetricFamily(
            "flowsite_attempts_failed_total",
            "Failed attempts of steps, fan-out items and compensations, by the kind of "
            "work and the failure class (transient, permanent, timeout, lease_expired, "
            "revoked, cancelled, budget).",
            labels=["workflow", "step", "kind", "failure_class"],
        )
        rows = (
            Event.objects.filter(type__in=FAILED_ATTEMPT_EVENTS, payload__has_key="failure_class")
            .exclude(type__endswith=".failed", payload__failure_class__in=_COUNTED_BY_LEASE_EVENT)
            .annotate(
                kind=KeyTextTransform("kind", "payload"),
                failure_class=KeyTextTransform("failure_class", "payload"),
            )
            .order_by()
            .values_list("run__workflow_name", "step__name", "type", "kind", "failure_class")
            .annotate(n=Count("id"))
        )
        counts: Counter[tuple[str, str, str, str]] = Counter()
        for workflow, step, event_type, kind, failure_class, count in rows:
            if failure_class not in FailureClass.values:
                continue  # an event written before failure classes (no class): not counted
            prefix = event_type.partition(".")[0]
            counts[workflow, step or "", kind if prefix == "lease" else prefix, failure_class] += (
                count
            )
        for labels, count in sorted(counts.items()):
            failed.add_metric(list(labels), count)
        return failed

    def _leases_expired(self) -> Metric:
        expired = CounterMetricFamily(
            "flowsite_leases_expired_total",
            "Leases of steps, fan-out items and compensations that expired and were reclaimed.",
            labels=["workflow"],
        )
        return _counted(expired, Event.objects.filter(type="lease.expired"), "run__workflow_name")

    def _gates_waiting(self) -> Metric:
        waiting = GaugeMetricFamily(
            "flowsite_gates_waiting", "Gates waiting for a decision.", labels=["workflow"]
        )
        gates = Step.objects.filter(kind=Gate.kind, status=StepStatus.WAITING)
        return _counted(waiting, gates, "run__workflow_name")


def _counted(
    metric: CounterMetricFamily | GaugeMetricFamily, rows: QuerySet[Any], *labels: str
) -> Metric:
    """``metric`` with a sample for each value of ``labels`` among ``rows``: how many of
    them have it (one grouped query)."""
    for *values, count in rows.order_by().values_list(*labels).annotate(n=Count("id")):
        metric.add_metric(values, count)
    return metric


def _progress_stale(before: datetime) -> Metric:
    """Running steps whose last progress report (or start, if they never reported) is
    older than ``before``: a handler that stopped moving while its lease is still renewed
    by heartbeats shows here before its timeout does."""
    stale = GaugeMetricFamily(
        "flowsite_steps_progress_stale",
        "Running steps with no progress reported for PROGRESS_STALE_AFTER (since their "
        "last ctx.progress, or since they started).",
        labels=["workflow", "step"],
    )
    rows = (
        Step.objects.filter(status=StepStatus.RUNNING)
        .annotate(last_moved=Coalesce("progress_at", "started_at"))
        .filter(last_moved__lt=before)
        .order_by()
        .values_list("run__workflow_name", "name")
        .annotate(n=Count("id"))
    )
    for workflow, step, count in rows:
        stale.add_metric([workflow, step], count)
    return stale


def _consumer_lag() -> Metric:
    """Events each consumer has yet to acknowledge: a consumer that stopped (or cannot
    keep up) shows a lag that keeps growing."""
    lag = GaugeMetricFamily(
        "flowsite_event_consumer_lag",
        "Events after the consumer's acknowledged position (workflows.consume/ack).",
        labels=["consumer"],
    )
    for consumer in consumer_lags():
        lag.add_metric([consumer.name], consumer.lag)
    return lag


def _latest_ready_before() -> Subquery:
    """The time of the latest ``step.ready`` event of the same step before this event."""
    return Subquery(
        Event.objects.filter(type="step.ready", step=OuterRef("step"), id__lt=OuterRef("id"))
        .order_by("-id")
        .values("created_at")[:1],
        output_field=DateTimeField(),
    )


def _schedule_slots() -> Iterator[Metric]:
    """Slots fired, skipped and missed by each schedule (its counters), in one statement."""
    labels = ["workflow", "schedule"]
    counters = {
        outcome: CounterMetricFamily(
            f"flowsite_schedule_slots_{outcome}_total",
            f"Slots of a run schedule {words} (the schedule's own counter).",
            labels=labels,
        )
        for outcome, words in (
            ("fired", "that started a run"),
            ("skipped", "skipped: an earlier run had not ended and the overlap policy is skip"),
            ("missed", "missed: older than the catch-up window when the sweeper came to them"),
        )
    }
    rows = Schedule.objects.order_by().values_list(
        "workflow_name", "key", "fired_count", "skipped_count", "missed_count"
    )
    for workflow, key, *counts in rows:
        for counter, count in zip(counters.values(), counts, strict=True):
            counter.add_metric([workflow, key], count)
    yield from counters.values()


def _histogram(
    name: str,
    documentation: str,
    rows: QuerySet[Any],
    labels: dict[str, str],
    duration: Combinable,
    *,
    milliseconds: bool = False,
) -> HistogramMetricFamily:
    """A histogram of ``duration`` over ``rows``, grouped by ``labels`` (label → field),
    counted per bucket in one SQL statement (a filtered COUNT per bucket). ``duration``
    is an interval, or with ``milliseconds`` a whole number of them (a payload's)."""
    family = HistogramMetricFamily(name, documentation, labels=list(labels))

    def bound_of(seconds: float) -> timedelta | float:
        return seconds * 1000 if milliseconds else timedelta(seconds=seconds)

    def seconds_of(total: Any) -> float:
        if milliseconds:
            return (total or 0) / 1000
        return (total or timedelta(0)).total_seconds()

    per_bucket = {
        f"le_{index}": Count("pk", filter=Q(metric_duration__lte=bound_of(bound)))
        for index, bound in enumerate(BUCKETS)
    }
    output: Field[Any, Any] = BigIntegerField() if milliseconds else DurationField()
    grouped = (
        rows.annotate(metric_duration=ExpressionWrapper(duration, output_field=output))
        .order_by()
        .values(*labels.values())
        .annotate(total=Count("pk"), seconds=Sum("metric_duration"), **per_bucket)
    )
    for row in grouped:
        buckets = [(str(bound), row[f"le_{index}"]) for index, bound in enumerate(BUCKETS)]
        family.add_metric(
            [row[field] for field in labels.values()],
            [*buckets, ("+Inf", row["total"])],
            seconds_of(row["seconds"]),
        )
    return family


registry = CollectorRegistry(auto_describe=False)
registry.register(DatabaseCollector())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format of :data:`registry`.

    404 unless ``WORKFLOWS["METRICS_ENABLED"]``; then either the bearer token of
    ``WORKFLOWS["METRICS_TOKEN"]`` (for scrapers) or a staff user holding
    ``workflows.view_metrics`` (for a person in a browser).
    """
    if not workflow_settings.METRICS_ENABLED:
        raise Http404("metrics are disabled")
    if not _has_token(request):
        user = request.user
        if not user.is_authenticated:
            response = HttpResponse("metrics need a bearer token or a login", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="flowsite-metrics"'
            return response
        if not (user.is_staff and user.has_perm(VIEW_METRICS)):
            return HttpResponse(f"metrics need a staff user with {VIEW_METRICS}", status=403)
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


def _has_token(request: HttpRequest) -> bool:
    expected = workflow_settings.METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(
        expected
        and scheme.lower() == "bearer"
        and hmac.compare_digest(given.strip().encode(), expected.encode())
    )
