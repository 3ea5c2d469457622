"""A loop with real processes: the worker running a body step of the second iteration is
killed with SIGKILL mid-handler. The sweeper reclaims that step after its lease, another
worker runs it again under the same idempotency key, in the same iteration, and the loop
goes on to its third round; nothing of the first iteration runs again."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from tests.acceptance.flowapp.loops import HELD_ITERATION, ROUNDS
from tests.acceptance.flowapp.models import HandlerCall
from tests.acceptance.stack import Stack
from workflows.models import Event, Step, StepIteration

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

STARTUP_TIMEOUT = 60.0  # qcluster start + the first iteration, on a loaded 2-core machine
RUN_TIMEOUT = 60.0


def test_a_worker_killed_mid_iteration_reruns_only_that_iterations_unfinished_step(stack: Stack):
    cluster = stack.qcluster(workers=2)
    stack.sweeper()
    [run_id] = stack.start_runs("acceptance_loop_crash", [{}])
    held = f"iteration {HELD_ITERATION}"
    killed = stack.wait_for(
        "the process step of the second iteration to start",
        lambda: HandlerCall.objects.filter(run_id=run_id, step_name="process", note=held).first(),
        timeout=STARTUP_TIMEOUT,
        run_ids=[run_id],
    )
    assert killed.pid in cluster.descendants()

    os.kill(killed.pid, signal.SIGKILL)
    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()

    assert run.status == "completed", run.error
    calls = list(
        HandlerCall.objects.filter(run_id=run_id).values_list(
            "step_name", "note", "attempt", "idempotency_key", "pid"
        )
    )
    # Every step of every iteration ran once, but the killed one, which ran twice.
    ran = Counter((name, note) for name, note, *_ in calls)
    expected = Counter(
        {("prepare", "iteration 1"): 1, ("finish", "iteration 1"): 1}
        | {
            (name, f"iteration {n}"): 1
            for n in range(1, ROUNDS + 1)
            for name in ("fetch", "process")
        }
    )
    expected[("process", held)] = 2
    assert ran == expected
    # The killed attempt and the one after it: the same iteration, the same key.
    [(first, key, pid), (second, again, other)] = [
        (attempt, key, pid)
        for name, note, attempt, key, pid in calls
        if (name, note) == ("process", held)
    ]
    assert (pid, key) == (killed.pid, killed.idempotency_key)
    assert (again, second) == (key, first + 1) and other != pid
    # The iterations around it had keys of their own.
    process_keys = {key for name, _, _, key, _ in calls if name == "process"}
    assert len(process_keys) == ROUNDS
    [expired] = Event.objects.filter(run_id=run_id, type="lease.expired").values_list(
        "payload", flat=True
    )
    assert f":{killed.pid}:" in expired["owner"]

    steps = {step.name: step for step in Step.objects.filter(run_id=run_id)}
    assert steps["again"].output == {"iterations": ROUNDS, "exhausted": False}
    # Attempts count on across iterations: 1, then 2 (killed) and 3, then 4.
    assert (steps["process"].iteration, steps["process"].attempt) == (ROUNDS, 4)
    archived = StepIteration.objects.filter(run_id=run_id, step__name="process")
    assert list(archived.order_by("iteration").values_list("iteration", "attempt")) == [
        (1, 1),
        (2, 3),
    ]
    # One step.completed per completed iteration (completion_problems counts one per
    # step, which a loop goes past): the killed attempt completed nothing.
    completed = Event.objects.filter(run_id=run_id, type="step.completed")
    assert Counter(completed.values_list("step__name", flat=True)) == {
        "prepare": 1,
        "fetch": ROUNDS,
        "process": ROUNDS,
        "again": 1,
        "finish": 1,
    }
    assert stack.monitor.problems == []
