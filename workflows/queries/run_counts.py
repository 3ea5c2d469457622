"""Runs by workflow and status as the dashboard shows them: every run not over, and the
runs that ended within a recent window, never the whole history.

Counting every run by ``(workflow_name, status)`` read the whole index of that pair: a
cost that grows with the history (a year of ended runs), for figures an operator reads
as "how are things now". :func:`recent_run_counts` counts the runs in a live status (the
status index, which the live work bounds) and the runs that ended at or after ``since``
(the ``finished_at`` index, which the window bounds), in one statement whose two
parts each an index serves (``docs/architecture.md``, "The dashboard aggregates from
indexes").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections, router
from django.db.models import CharField, Count, QuerySet

from workflows.models import Run
from workflows.queries.plan_terms import Unindexed
from workflows.status import RUN_FINAL, RunStatus

__all__ = ["LIVE_STATUSES", "RecentRunCounts", "recent_run_counts"]

LIVE_STATUSES = tuple(sorted(status for status in RunStatus.values if status not in RUN_FINAL))
"""Every status of a run not over (queued, blocked, pending, running, waiting, paused,
rolling back), sorted: the runs counted whatever their age."""


@dataclass
class RecentRunCounts:
    """Runs by status and by workflow and status: those not over, and those that ended
    at or after ``since``."""

    since: datetime
    by_status: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    by_workflow: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )

    @property
    def live(self) -> int:
        """Runs not over."""
        return sum(n for status, n in self.by_status.items() if status not in RUN_FINAL)

    @property
    def ended(self) -> int:
        """Runs that ended at or after ``since``."""
        return sum(n for status, n in self.by_status.items() if status in RUN_FINAL)


def recent_run_counts(since: datetime) -> RecentRunCounts:
    """Every run not over and every run that ended at or after ``since``, counted by
    workflow and status: one statement, the ``UNION ALL`` of two ``GROUP BY`` statements, each
    over one index range (a live status; ``finished_at >= since``), never the whole
    table.

    Two parts rather than one ``OR``: PostgreSQL reads an ``OR`` of the two ranges as a
    bitmap of both indexes, but SQLite scanned the whole ``(workflow_name, status)``
    index for it (120 ms at a million runs). The second part leaves out the live
    statuses (a ``NOT IN``, which no index serves, so each database reads the window's
    range), so a run is counted once, by its status: one in a final status whose
    ``finished_at`` is before ``since`` (or unset) is left out; one not over is counted
    whatever its ``finished_at`` says."""
    counts = RecentRunCounts(since)
    live = _by_workflow_and_status(Run.objects.filter(status__in=LIVE_STATUSES))
    ended = Run.objects.filter(finished_at__gte=since).exclude(status__in=LIVE_STATUSES)
    if connections[router.db_for_read(Run)].vendor == "sqlite":
        # Grouped by the columns as given, SQLite walked the whole (workflow_name,
        # status) index for its order rather than read the window's range and sort it
        # (0.8 s against 2 ms at a million runs): the unary ``+`` of each column keeps
        # that index from offering its order.
        unindexed: QuerySet[Any] = ended.annotate(
            workflow=Unindexed("workflow_name", output_field=CharField()),
            run_status=Unindexed("status", output_field=CharField()),
        )
        grouped = unindexed.values("workflow", "run_status").annotate(runs=Count("*"))
        ended_rows = grouped.order_by().values_list("workflow", "run_status", "runs")
    else:
        ended_rows = _by_workflow_and_status(ended)
    # ``order_by()`` on the union too: Django 6 gives a combined query the model's
    # ordering, which names no column of these rows.
    for workflow, status, runs in live.union(ended_rows, all=True).order_by():
        counts.by_status[status] += runs
        counts.by_workflow[workflow][status] += runs
    return counts


def _by_workflow_and_status(runs: QuerySet[Run]) -> QuerySet[Run, tuple[str, str, int]]:
    return (
        runs.values("workflow_name", "status")
        .annotate(runs=Count("*"))
        .order_by()
        .values_list("workflow_name", "status", "runs")
    )
