"""A worker frozen in the middle of a transition must not freeze anyone else's runs."""

from __future__ import annotations

import json
import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

import workflows
from tests.acceptance.flowapp.handlers import STALL_DIR
from tests.acceptance.invariants import completion_problems
from tests.acceptance.stack import Stack
from workflows.models import Run

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

FROZEN_FOR_AT_MOST = 20.0  # seconds; the other run's timer is due 3 s after the freeze


@pytest.mark.skipif(
    connection.vendor == "sqlite",
    reason="SQLite has one write lock for the whole database: a process frozen inside a "
    "transaction stops every writer until it resumes, whatever the engine does",
)
def test_a_worker_frozen_inside_a_transition_does_not_stop_the_sweeper(
    stack: Stack, tmp_path: Path
):
    """A worker process freezes (SIGSTOP: think GC pause, swap storm, paused VM) inside
    the transition that completes a step, holding that run's row lock. Its lease runs
    out, so the sweeper wants to reclaim the step and needs the same lock. Scanners
    handle each item on its own and skip what another process holds (STYLE §7): the
    sweeper must go on firing the timers of every other run meanwhile."""
    stack.sweeper()
    frozen_run = workflows.start_run("acceptance_stall", {"stall_seconds": 2}).pk
    runs_file = tmp_path / "runs.json"
    runs_file.write_text(json.dumps([str(frozen_run)]))
    worker = stack.processes.start(
        "worker",
        "acceptance_drain",
        str(runs_file),
        # The racing-worker command without a queue: no django-q2 timeout fires while
        # the process is stopped, so the freeze lasts exactly as long as the test says.
        env={"FLOWSITE_EXECUTOR": "inline"},
    )
    pid_file = stack.var_dir / STALL_DIR / str(frozen_run)
    pid = int(
        stack.wait_for(
            "the worker to evaluate the stalling condition",
            lambda: pid_file.exists() and pid_file.read_text(),
            timeout=60,
            run_ids=[frozen_run],
        )
    )

    os.kill(pid, signal.SIGSTOP)
    try:
        wake_at = timezone.now() + timedelta(seconds=3)
        other_run = workflows.start_run("acceptance_nap", {"wake_at": wake_at.isoformat()}).pk
        stack.wait_for(
            "another run's sleep timer to fire while a worker is frozen holding the first "
            "run's lock (a sweeper that waits for that lock instead of skipping the run "
            "stops here)",
            lambda: Run.objects.filter(pk=other_run, status="completed").exists(),
            timeout=FROZEN_FOR_AT_MOST,
            run_ids=[frozen_run, other_run],
        )
    finally:
        os.kill(pid, signal.SIGCONT)
        # Once resumed, the worker finishes its run and exits by design: not a failure.
        worker.watched = False

    runs = stack.wait_finished([frozen_run, other_run], timeout=60)
    assert {run.status for run in runs.values()} == {"completed"}
    assert completion_problems(list(runs)) == []
    assert stack.monitor.problems == []
