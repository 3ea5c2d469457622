"""A purge killed in the middle (``manage.py workflows_purge`` in a process of its own,
SIGKILL after its first batches) leaves whole runs only, and running it again finishes.

Each batch deletes its runs with every row of theirs in one transaction: whatever the
moment of the kill, a run is either there with all its steps and events, or gone with
all of them. Nothing records where the purge was; the second one starts from the oldest
run left.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.acceptance.harness import Processes
from workflows.models import Event, Run, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUNS = 3000
STEPS = 2
EVENTS = 3
KILL_WAIT = 60.0  # the process's start, then its first batches


def old_history(count: int) -> None:
    """``count`` completed runs, ended 10 days ago and before, each with its rows."""
    now = timezone.now()
    runs = Run.objects.bulk_create(
        Run(
            workflow_name="retention_bulk",
            workflow_version=1,
            snapshot={},
            status="completed",
            started_at=now - timedelta(days=10, seconds=n + 1),
            finished_at=now - timedelta(days=10, seconds=n),
        )
        for n in range(count)
    )
    Step.objects.bulk_create(
        Step(run=run, name=f"s{i}", kind="task", status="completed")
        for run in runs
        for i in range(STEPS)
    )
    Event.objects.bulk_create(
        Event(run=run, type="step.completed") for run in runs for _ in range(EVENTS)
    )


def rows_by_run() -> tuple[Counter, Counter]:
    steps = Counter(Step.objects.values_list("run_id", flat=True))
    events = Counter(Event.objects.values_list("run_id", flat=True))
    return steps, events


def test_a_killed_purge_leaves_whole_runs_and_the_next_purge_finishes(
    processes: Processes,
) -> None:
    old_history(RUNS)
    young = Run.objects.create(
        workflow_name="retention_bulk",
        workflow_version=1,
        snapshot={},
        status="completed",
        finished_at=timezone.now() - timedelta(days=1),
    )
    purge = processes.start("purge", "workflows_purge", "--older-than", "7", "--batch-ms", "2")
    deadline = time.monotonic() + KILL_WAIT
    while Run.objects.count() == RUNS + 1:
        assert purge.running(), purge.log_tail()
        assert time.monotonic() < deadline, purge.log_tail()
        time.sleep(0.01)
    processes.signal(purge, signal.SIGKILL)
    purge.popen.wait(timeout=10)
    purge.watched = False

    left = set(Run.objects.values_list("pk", flat=True))
    assert young.pk in left
    assert 1 < len(left) < RUNS + 1, "the purge was killed before its first or after its last batch"
    steps, events = rows_by_run()
    # Whole runs: every run left has all its rows, and no row outlived its run.
    assert set(steps) == set(events) == left - {young.pk}
    assert set(steps.values()) == {STEPS} and set(events.values()) == {EVENTS}

    out = processes.run("purge-again", "workflows_purge", "--older-than", "7", "--json")
    report = json.loads(out)
    assert report["runs"] == len(left) - 1 and report["stopped"] == "done"
    assert set(Run.objects.values_list("pk", flat=True)) == {young.pk}
    assert not Step.objects.exists() and not Event.objects.exists()
