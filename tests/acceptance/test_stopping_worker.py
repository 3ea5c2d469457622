"""A worker told to stop in the middle of a busy queue stops after the step in hand.

Workers chain through a run and then pull further ready work from the database for up
to ``CHAIN_BUDGET``; a stop must not wait for that. ``workflows_worker`` hands its
clusters' stop event to the workers it forks, so on SIGTERM each finishes the attempt it
holds and takes nothing more from the database: the steps started after the signal are
the attempt in hand and the messages already in the cluster's task queue, each run
without chaining. The work left over stays ``ready`` and the next worker finishes it.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.utils import timezone

from tests.acceptance.invariants import completion_problems, idempotency_problems
from workflows.models import Event, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUNS = 60
STARTUP_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0  # upstream's orderly stop: pusher, workers, monitor, one by one
RUN_TIMEOUT = 180.0
# The attempt in hand, the one message in the task queue (its limit is workers² = 1) and
# one the pusher was handing over: each runs alone once the stop is signalled.
MOST_STARTS_AFTER_STOP = 3


def test_a_stopped_worker_ends_with_the_step_in_hand_and_leaves_the_rest_ready(stack):
    cluster = stack.qcluster(workers=1)
    run_ids = stack.start_runs("acceptance_diamond", [{"pause": [0.05, 0.05]}] * RUNS)
    completed = Event.objects.filter(run__in=run_ids, type="step.completed")
    stack.wait_for(
        "the worker to be busy with the runs",
        lambda: completed.count() >= 20,
        timeout=STARTUP_TIMEOUT,
        run_ids=run_ids,
    )

    signalled_at = timezone.now()
    cluster.watched = False
    os.kill(cluster.pid, signal.SIGTERM)
    began = time.monotonic()
    stack.wait_for("the worker to stop", lambda: not cluster.running(), timeout=STOP_TIMEOUT)
    print(f"the worker stopped {time.monotonic() - began:.1f} s after SIGTERM")

    assert cluster.popen.wait(timeout=STOP_TIMEOUT) == 0, cluster.log_tail()
    started_after = Event.objects.filter(
        run__in=run_ids, type="step.started", created_at__gt=signalled_at
    ).count()
    assert started_after <= MOST_STARTS_AFTER_STOP
    assert not Step.objects.filter(run__in=run_ids, status="running").exists()
    left = Step.objects.filter(run__in=run_ids, status="ready").count()
    assert left > 0, "the worker ran every run before it stopped: nothing was left to show"

    stack.qcluster(workers=1)
    runs = stack.wait_finished(run_ids, timeout=RUN_TIMEOUT)
    assert {run.status for run in runs.values()} == {"completed"}
    assert completion_problems(run_ids) == []
    assert idempotency_problems(run_ids) == []
