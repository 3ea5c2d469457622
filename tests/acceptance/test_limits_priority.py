"""Priority with a real worker: ready work starts highest priority first.

Queue messages are nudges in the order work became ready; the claim applies priority,
taking the highest-priority ready unit of the route whatever message it was handed. One
worker process keeps the order observable: it starts one step at a time, so the order of
the ``step.started`` events is the order of the claims.
"""

from __future__ import annotations

import json
from uuid import UUID

import pytest

from tests.acceptance.flowapp.limits import Ranked
from tests.acceptance.harness import read_json_line
from tests.acceptance.invariants import completion_problems, queue_failures
from tests.acceptance.stack import Stack
from workflows.models import Event, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

BLOCKER_PRIORITY = 100
# Started in this order while the worker is busy; ties included.
PRIORITIES = [3, -5, 40, 7, 0, 40, 12, -1, 25, 7, 60, 1]
STARTUP_TIMEOUT = 60.0
RUN_TIMEOUT = 120.0


def start_ranked(stack: Stack, ranked: list[tuple[int, dict]]) -> list[UUID]:
    """Start one run per (priority, input) from a separate process, in order."""
    out = stack.processes.run("start", "acceptance_start_ranked", Ranked.name, json.dumps(ranked))
    return [UUID(run_id) for run_id in read_json_line(out)]


def test_ready_work_starts_in_priority_order_once_the_worker_is_free(stack):
    """One worker process is busy on a blocking step while runs of mixed priorities are
    started behind it (their queue messages in start order). Once the blocker is
    released, their steps start highest priority first, on the messages already queued:
    none waits for the redispatch scanner to send it again (a message whose step another
    message's claim took takes the best ready step instead).
    """
    stack.qcluster(workers=1)
    stack.sweeper()
    blocker, *run_ids = start_ranked(
        stack,
        [(BLOCKER_PRIORITY, {"hold_attempts": [1]})] + [(p, {}) for p in PRIORITIES],
    )
    steps = Step.objects.filter(run__in=run_ids)
    stack.wait_for(
        "the blocker to run while every other step is ready behind it",
        lambda: (
            Step.objects.filter(run=blocker, status="running").exists()
            and steps.filter(status="ready").count() == len(run_ids)
        ),
        timeout=STARTUP_TIMEOUT,
        run_ids=[blocker, *run_ids],
    )
    stack.release(blocker)

    runs = stack.wait_finished([blocker, *run_ids], timeout=RUN_TIMEOUT)

    assert {run.status for run in runs.values()} == {"completed"}
    # Every step was ready before the blocker ended (it was released, not timed out)...
    [blocker_done] = Event.objects.filter(run=blocker, type="step.completed")
    ready = Event.objects.filter(run__in=run_ids, type="step.ready")
    assert ready.count() == len(run_ids)
    assert max(ready.values_list("pk", flat=True)) < blocker_done.pk
    # ...and they started one at a time, highest priority first.
    priority = dict(steps.values_list("pk", "priority"))
    started = Event.objects.filter(run__in=run_ids, type="step.started").order_by("pk")
    order = [priority[step_id] for step_id in started.values_list("step_id", flat=True)]
    assert order == sorted(PRIORITIES, reverse=True)
    assert min(started.values_list("pk", flat=True)) > blocker_done.pk
    assert completion_problems([blocker, *run_ids]) == []
    assert queue_failures() == []
    assert stack.monitor.problems == []
    assert not Event.objects.filter(run__in=run_ids, type="step.redispatched").exists()
