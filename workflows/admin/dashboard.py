"""The console's dashboard: where all runs stand, the last day by hour, what needs a person.

A fixed number of queries whatever the number of runs (:data:`QUERIES`), each a grouped
count or an indexed lookup: runs by workflow and status, those not over and those ended
in the last :data:`ENDED_WINDOW` (one ``GROUP BY`` over two index ranges,
:func:`~workflows.queries.run_counts.recent_run_counts`, never the whole history), runs started
and finished per hour over 24 hours (two), the waiting gates (one), the runs in each
attention class (one per class, with :func:`runs_needing_attention`'s SQL that lets the
database start from the few rows that match), and worker health.

Worker health is read from what workers leave behind, since Flowsite keeps no heartbeat
table: the newest history entry a sweeper or scanner writes (``timer.fired``,
``run.repaired``, ``lease.expired``) among the latest :data:`ACTIVITY_WINDOW` entries,
so a quiet site does not scan its whole history; the depth of django-q2's ORM queue
when the ORM broker is used; and the leases that expired without being reclaimed, which
is what a missing sweeper looks like.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, Subquery
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django_q.models import OrmQ

from workflows.admin.runs import COUNT_CAP, badge
from workflows.approvals import count_waiting_gates, waiting_gates
from workflows.engine.work_kinds import WORK_KINDS
from workflows.models import Event, Run
from workflows.queries import Attention, expired_lease, runs_needing_attention
from workflows.queries.run_counts import recent_run_counts
from workflows.status import RUN_FINAL, RunStatus

__all__ = [
    "ACTIVITY_WINDOW",
    "ENDED_WINDOW",
    "FAILED_STATUSES",
    "QUERIES",
    "dashboard",
    "hourly_chart",
]

HOURS = 24
# Ended runs are counted over this window (the chart's day), live runs whatever their age:
# a count of the whole history grew with it and told an operator nothing about now.
ENDED_WINDOW = timedelta(hours=HOURS)
# History entries searched, newest first, for the last sweeper or scanner activity.
ACTIVITY_WINDOW = 50_000
SWEEPER_EVENTS = ("timer.fired", "run.repaired", "lease.expired")
# What the chart counts as failed: runs that ended in failure, compensated or not.
FAILED_STATUSES = (RunStatus.FAILED, RunStatus.COMPENSATED, RunStatus.COMPENSATION_FAILED)
GATES_SHOWN = 8
# Attention classes the dashboard counts (``ok`` is everything else).
ATTENTION_CLASSES = tuple(value for value in Attention if value != Attention.OK)
# The queries of one dashboard: by status and workflow, started per hour, finished per
# hour, the oldest gates and their bounded count, sweeper activity, expired leases, queue
# depth; one per attention class.
QUERIES = 8 + len(ATTENTION_CLASSES)

CHART_WIDTH = 960
CHART_HEIGHT = 220
CHART_LEFT = 40
CHART_BOTTOM = 24
SERIES = (("started", "Started"), ("completed", "Completed"), ("failed", "Failed"))


@dataclass(frozen=True)
class Hour:
    """One hour of the chart: its start and the runs started, completed and failed in it."""

    start: datetime
    started: int
    completed: int
    failed: int


def _hours(now: datetime) -> list[Hour]:
    """Runs started and finished in each of the last 24 hours: two queries.

    Each hour is a filtered ``COUNT`` of one aggregate over the day's rows rather than a
    ``GROUP BY`` of the truncated time: truncating calls a function per row (a Python
    one on SQLite), comparing with 24 bounds does not.
    """
    since = (now - timedelta(hours=HOURS - 1)).replace(minute=0, second=0, microsecond=0)
    starts = [since + timedelta(hours=offset) for offset in range(HOURS)]

    def per_hour(field: str, **extra: Any) -> dict[str, Count]:
        return {
            f"h{index}": Count(
                "pk",
                filter=Q(
                    **{f"{field}__gte": start, f"{field}__lt": start + timedelta(hours=1)},
                    **extra,
                ),
            )
            for index, start in enumerate(starts)
        }

    started = Run.objects.filter(created_at__gte=since).aggregate(**per_hour("created_at"))
    # Each count filters on its statuses; the WHERE is the time alone, so that the
    # finished_at index is the way in (with the statuses too, SQLite reads every
    # completed run through the status index instead).
    finished = Run.objects.filter(finished_at__gte=since).aggregate(
        **{
            f"c{key}": value
            for key, value in per_hour("finished_at", status=RunStatus.COMPLETED).items()
        },
        **{
            f"f{key}": value
            for key, value in per_hour("finished_at", status__in=FAILED_STATUSES).items()
        },
    )
    return [
        Hour(
            start=start,
            started=started[f"h{index}"],
            completed=finished[f"ch{index}"],
            failed=finished[f"fh{index}"],
        )
        for index, start in enumerate(starts)
    ]


def hourly_chart(hours: list[Hour]) -> SafeString:
    """Grouped bars (started, completed, failed) per hour as an inline SVG image."""
    peak = max((max(h.started, h.completed, h.failed) for h in hours), default=0) or 1
    plot_height = CHART_HEIGHT - CHART_BOTTOM - 10
    group = (CHART_WIDTH - CHART_LEFT) / max(len(hours), 1)
    bar = (group - 6) / len(SERIES)
    bars = []
    labels = []
    for index, hour in enumerate(hours):
        x = CHART_LEFT + index * group + 3
        for position, (series, label) in enumerate(SERIES):
            value = getattr(hour, series)
            height = plot_height * value / peak
            bars.append(
                (
                    series,
                    round(x + position * bar, 1),
                    round(10 + plot_height - height, 1),
                    round(bar - 1, 1),
                    round(height, 1),
                    f"{hour.start:%H}:00 — {label.lower()}: {value}",
                )
            )
        if index % 3 == 0:
            labels.append((round(x, 1), CHART_HEIGHT - 6, f"{hour.start:%H}:00"))
    return format_html(
        '<svg class="wf-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        'aria-labelledby="wf-chart-title" width="{}" height="{}" viewBox="0 0 {} {}">'
        '<title id="wf-chart-title">Runs started, completed and failed per hour, last {} hours'
        "</title>"
        '<line class="axis" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<text class="tick" x="4" y="16">{}</text><text class="tick" x="4" y="{}">0</text>'
        "{}{}</svg>",
        CHART_WIDTH,
        CHART_HEIGHT,
        CHART_WIDTH,
        CHART_HEIGHT,
        HOURS,
        CHART_LEFT,
        CHART_HEIGHT - CHART_BOTTOM,
        CHART_WIDTH,
        CHART_HEIGHT - CHART_BOTTOM,
        peak,
        CHART_HEIGHT - CHART_BOTTOM,
        format_html_join(
            "",
            '<rect class="bar {}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
            bars,
        ),
        format_html_join("", '<text class="tick" x="{}" y="{}">{}</text>', labels),
    )


def _last_sweeper_activity() -> datetime | None:
    newest = Event.objects.order_by("-id").values("id")[:1]
    return (
        Event.objects.filter(type__in=SWEEPER_EVENTS, id__gt=Subquery(newest) - ACTIVITY_WINDOW)
        .order_by("-id")
        .values_list("created_at", flat=True)
        .first()
    )


def _expired_leases(now: datetime) -> int:
    """Running steps, items and compensations whose lease ran out: one query."""
    first, *others = (
        kind.model.objects.filter(expired_lease(now)).order_by().values("id") for kind in WORK_KINDS
    )
    return first.union(*others, all=True).count()


# django-q2's brokers in the order it picks one (``django_q.brokers.get_broker``): the
# first of these ``Q_CLUSTER`` keys that is set names it; none of them, Redis.
_BROKERS = (
    ("broker_class", "a custom broker"),
    ("iron_mq", "IronMQ"),
    ("sqs", "Amazon SQS"),
    ("orm", "ORM"),
    ("mongo", "MongoDB"),
)


def queue_broker() -> str:
    """The broker that carries django-q2's queue, named as an operator knows it."""
    q_cluster = getattr(settings, "Q_CLUSTER", {})
    return next((name for key, name in _BROKERS if q_cluster.get(key)), "Redis")


def _queue_depth() -> tuple[int, int] | None:
    """Messages in django-q2's ORM queue, and those a worker has taken: ``None`` when
    another broker (:func:`queue_broker`) carries the queue, whose depth only its own
    tools see."""
    q_cluster = getattr(settings, "Q_CLUSTER", {})
    if "orm" not in q_cluster:
        return None
    totals = OrmQ.objects.using(q_cluster["orm"]).aggregate(
        waiting=Count("pk"), taken=Count("pk", filter=Q(lock__isnull=False))
    )
    return totals["waiting"], totals["taken"]


def dashboard(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The dashboard page, for those who may view runs."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    now = timezone.now()
    site = model_admin.admin_site.name
    runs_url = reverse(f"{site}:workflows_run_changelist")
    counts = recent_run_counts(now - ENDED_WINDOW)

    def status_url(status: str) -> str:
        if status not in RUN_FINAL:
            return f"{runs_url}?{urlencode({'status__exact': status})}"
        # The same window as the count: the list then shows what the tile counted.
        ended = {"status__exact": status, "finished_at__gte": counts.since.isoformat()}
        return f"{runs_url}?{urlencode(ended)}"

    def tiles(final: bool) -> list[tuple[str, SafeString, int, str]]:
        return [
            (status, badge(status), counts.by_status[status], status_url(status))
            for status in RunStatus.values
            if counts.by_status.get(status) and (status in RUN_FINAL) == final
        ]

    hours = _hours(now)
    gates = waiting_gates(GATES_SHOWN)
    attention = [
        {
            "class": value,
            "label": Attention(value).label,
            # Counted up to the cap, as the runs list counts: "10000+" beyond it.
            "runs": runs_needing_attention(value, now=now)
            .order_by()
            .values("pk")[: COUNT_CAP + 1]
            .count(),
            "url": f"{runs_url}?attention={value}",
        }
        for value in ATTENTION_CLASSES
    ]
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": "Workflow dashboard",
        "cap": COUNT_CAP,
        "opts": Run._meta,
        "now": now,
        "runs_url": runs_url,
        "live_total": counts.live,
        "ended_total": counts.ended,
        "ended_window_hours": int(ENDED_WINDOW.total_seconds() // 3600),
        "live_statuses": tiles(final=False),
        "ended_statuses": tiles(final=True),
        "workflows": [
            (name, sum(by.values()), [(s, badge(s), n) for s, n in sorted(by.items())])
            for name, by in sorted(counts.by_workflow.items())
        ],
        "hours": hours,
        "chart": hourly_chart(hours),
        "totals_24h": {
            series: sum(getattr(hour, series) for hour in hours) for series, _ in SERIES
        },
        "gates": gates,
        "gates_total": count_waiting_gates(None),
        "inbox_url": reverse(f"{site}:workflows_approvals"),
        "attention": attention,
        "last_sweep": _last_sweeper_activity(),
        "activity_window": ACTIVITY_WINDOW,
        "expired_leases": _expired_leases(now),
        "queue": _queue_depth(),
        "queue_broker": queue_broker(),
    }
    return TemplateResponse(request, "workflows/admin/dashboard.html", context)
