"""An idle worker killed with SIGKILL, as an out-of-memory kill would: work must go on.

An idle django-q2 worker waits in ``multiprocessing.Queue.get()``, which holds the
cluster's task-queue read lock (a semaphore shared by every worker) while it blocks
reading the queue's pipe. A SIGKILLed process never releases it, so upstream every other
worker, and the replacement django-q2 spawns, then waits on that lock forever: runs stay
``ready`` while every process looks healthy. The tests kill exactly that worker (the one
blocked in the pipe read) and require new runs to finish within ``RECOVERY_BOUND`` of
the kill, with no operator action. The monitor, which likewise waits holding the result
queue's read lock, gets the same treatment.
"""

from __future__ import annotations

import os
import signal
import time
from uuid import UUID

import pytest
from django_q.models import OrmQ

from tests.acceptance.harness import Process, wchan
from tests.acceptance.invariants import completion_problems, idempotency_problems
from tests.acceptance.stack import Stack
from workflows.models import Event, Run, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

WORKERS = 3
STARTUP_TIMEOUT = 60.0  # qcluster start on a loaded 2-core machine
RECOVERY_BOUND = 30.0  # seconds from the kill until a run started after it has finished
SLOW_STEP_SECONDS = 4.0
RUN_TIMEOUT = 90.0


def kill_task_queue_reader(stack: Stack, cluster: Process) -> tuple[int, float]:
    """SIGKILL the idle worker that holds the task queue's read lock; return it and when."""
    pid = stack.wait_for(
        f"{WORKERS} workers, one of them blocked reading the task queue",
        lambda: len(stack.children(cluster)) == WORKERS and stack.task_queue_reader(cluster),
        timeout=STARTUP_TIMEOUT,
    )
    os.kill(pid, signal.SIGKILL)
    return pid, time.monotonic()


def finish_after_kill(stack: Stack, run_id: UUID, killed_at: float) -> tuple[Run, float]:
    """Wait for the run until ``RECOVERY_BOUND`` after the kill; return it and the delay."""
    [run] = stack.wait_finished(
        [run_id], timeout=max(0.0, killed_at + RECOVERY_BOUND - time.monotonic())
    ).values()
    recovered_after = time.monotonic() - killed_at
    print(f"run {run_id} finished {recovered_after:.1f} s after the kill")
    return run, recovered_after


def test_work_goes_on_after_the_idle_worker_holding_the_task_queue_is_killed(stack):
    """Kill the idle worker blocked on the task queue, then start a run: it completes
    within the bound. Twice, so the cluster that recovered survives the same kill."""
    cluster = stack.qcluster(workers=WORKERS)
    stack.sweeper()
    killed: list[int] = []
    run_ids: list[UUID] = []
    for _ in range(2):
        pid, killed_at = kill_task_queue_reader(stack, cluster)
        killed.append(pid)
        [run_id] = stack.start_runs("acceptance_diamond", [{}])
        run_ids.append(run_id)

        run, recovered_after = finish_after_kill(stack, run_id, killed_at)

        assert run.status == "completed"
        assert recovered_after < RECOVERY_BOUND
        assert not set(killed) & set(cluster.descendants())
    assert completion_problems(run_ids) == []
    assert idempotency_problems(run_ids) == []
    assert stack.monitor.problems == []


def test_a_step_in_progress_keeps_its_worker_when_an_idle_worker_is_killed(stack):
    """One worker is inside a slow step when an idle one is killed. Recovery must not
    take the step from it: the step completes on its first attempt, in that worker,
    without a lease expiring, while a run started after the kill finishes in time."""
    cluster = stack.qcluster(workers=WORKERS)
    stack.sweeper()
    pause = [SLOW_STEP_SECONDS, SLOW_STEP_SECONDS]
    [slow_id] = stack.start_runs("acceptance_diamond", [{"pause": pause}])
    [(busy_pid, busy_step)] = stack.wait_for(
        "a worker inside the slow run's first step",
        lambda: list(stack.busy_steps(cluster).items()),
        timeout=STARTUP_TIMEOUT,
        run_ids=[slow_id],
        interval=0.05,
    )

    killed, killed_at = kill_task_queue_reader(stack, cluster)
    assert killed != busy_pid
    [quick_id] = stack.start_runs("acceptance_diamond", [{}])
    quick, _ = finish_after_kill(stack, quick_id, killed_at)
    [slow] = stack.wait_finished([slow_id], timeout=RUN_TIMEOUT).values()

    assert (quick.status, slow.status) == ("completed", "completed")
    first = Step.objects.get(pk=busy_step)
    assert (first.name, first.attempt, first.output["pid"]) == ("first", 1, busy_pid)
    assert not Event.objects.filter(run_id=slow_id, type="lease.expired").exists()
    assert completion_problems([quick_id, slow_id]) == []
    assert idempotency_problems([quick_id, slow_id]) == []
    assert stack.monitor.problems == []


def test_the_queue_is_acknowledged_again_after_the_waiting_monitor_is_killed(stack):
    """The monitor saves results and acknowledges their messages, waiting for the next
    result inside ``Queue.get()`` like a worker. Killed there, upstream's replacement
    waits on the dead lock: steps still run, but no message is ever acknowledged, so
    the ORM broker redelivers every one of them after ``retry``, again and again."""
    cluster = stack.qcluster(workers=2)
    stack.sweeper()
    [monitor] = stack.wait_for(
        "the monitor, blocked reading the result queue",
        lambda: [pid for pid in stack.children(cluster, "monitor") if "pipe" in wchan(pid)],
        timeout=STARTUP_TIMEOUT,
    )
    os.kill(monitor, signal.SIGKILL)
    killed_at = time.monotonic()
    [run_id] = stack.start_runs("acceptance_diamond", [{}])

    run, _ = finish_after_kill(stack, run_id, killed_at)
    stack.wait_for(
        "django-q2's queue to be acknowledged empty",
        lambda: not OrmQ.objects.exists(),
        timeout=max(0.0, killed_at + RECOVERY_BOUND - time.monotonic()),
        run_ids=[run_id],
    )

    assert run.status == "completed"
    assert completion_problems([run_id]) == []
    assert stack.monitor.problems == []
