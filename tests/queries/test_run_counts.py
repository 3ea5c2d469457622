"""The dashboard's counts of runs by workflow and status (live runs, and runs ended in a
recent window) agree with the plain ``GROUP BY`` of every run, filtered the same way."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from workflows.models import Run
from workflows.queries.run_counts import LIVE_STATUSES, recent_run_counts
from workflows.status import RUN_FINAL, RunStatus

pytestmark = pytest.mark.django_db


def history() -> None:
    """Every status, each ended one finished at several ages around a day ago."""
    now = timezone.now()
    runs = []
    for number, status in enumerate(RunStatus.values * 4):
        age = timedelta(hours=6 * (number % 9))  # 0 h to 48 h
        runs.append(
            Run(
                workflow_name=f"wf_{number % 3}",
                workflow_version=1,
                snapshot={},
                status=status,
                business_key=f"K-{number}",
                finished_at=now - age if status in RUN_FINAL else None,
            )
        )
    # A run not over whose finished_at is set: counted as live, once.
    runs.append(
        Run(
            workflow_name="wf_0",
            workflow_version=1,
            snapshot={},
            status="running",
            finished_at=now - timedelta(days=5),
        )
    )
    Run.objects.bulk_create(runs)


def test_the_counts_are_the_plain_group_by_of_live_runs_and_recently_ended_ones():
    history()
    since = timezone.now() - timedelta(hours=24)
    expected: Counter[tuple[str, str]] = Counter()
    for workflow, status, finished in Run.objects.values_list(
        "workflow_name", "status", "finished_at"
    ):
        if status in LIVE_STATUSES or (finished is not None and finished >= since):
            expected[workflow, status] += 1
    counts = recent_run_counts(since)
    got = Counter(
        {(wf, status): n for wf, by in counts.by_workflow.items() for status, n in by.items()}
    )
    assert got == expected
    assert sum(counts.by_status.values()) == sum(expected.values())
    assert counts.live == sum(n for (_, s), n in expected.items() if s not in RUN_FINAL)
    assert counts.ended == sum(n for (_, s), n in expected.items() if s in RUN_FINAL)
    assert 0 < counts.ended < Run.objects.filter(status__in=RUN_FINAL).count()


def test_the_live_statuses_are_every_status_not_final():
    assert set(LIVE_STATUSES) == set(RunStatus.values) - RUN_FINAL
    assert list(LIVE_STATUSES) == sorted(LIVE_STATUSES)
