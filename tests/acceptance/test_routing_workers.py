"""Routing with real workers: work reaches only the workers of its route.

A step requiring capability ``cuda`` waits ``ready`` while only workers without it run,
their own steps going on around it, and ``explain`` names the worker it waits for; it
runs once a worker started with ``--capability cuda`` serves its route. A step of queue
``gpu`` runs only on a worker serving ``gpu``. Each route is a django-q2 cluster (broker
list) of its own, so a worker not serving a route never even receives its messages.
"""

from __future__ import annotations

import os
import signal
from typing import Any
from uuid import UUID

import pytest
from django.test import override_settings

import workflows
from tests.acceptance.harness import Process, all_stats, live, pid_of_owner, proc_stat
from tests.acceptance.invariants import completion_problems
from tests.acceptance.stack import Stack
from workflows.models import Event, Step, WorkerPresence

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

STARTUP_TIMEOUT = 60.0
RUN_TIMEOUT = 120.0
# explain() in this process judges routes as the workers' deployment does.
ON_WORKERS = override_settings(WORKFLOWS={"EXECUTOR": "django_q"})


def worker(stack: Stack, name: str, *options: str) -> Process:
    """A ``workflows_worker`` with one process per route, recorded as present."""
    process = stack.processes.start(
        name, "workflows_worker", *options, env={"FLOWSITE_WORKERS": "1"}
    )
    stack.wait_for(
        f"{name} to record its presence",
        lambda: WorkerPresence.objects.filter(name__endswith=f":{process.pid}").exists(),
        timeout=STARTUP_TIMEOUT,
    )
    return process


def starts(run_id: UUID, step: str) -> list[int]:
    """The process ids of every attempt of ``step`` that started, from the history."""
    events = Event.objects.filter(run_id=run_id, step__name=step, type="step.started")
    return [pid_of_owner(event.payload["owner"]) for event in events.order_by("id")]


def status(run_id: UUID, step: str) -> str:
    return Step.objects.get(run_id=run_id, name=step).status


def completed_on(stack: Any, run_id: UUID, step: str, process: Any) -> int:
    """Wait for the run to end: it completed, each of its steps once, and ``step`` ran
    once, in ``process`` (or a process of its); the process id it ran in."""
    run = stack.wait_finished([run_id], timeout=RUN_TIMEOUT)[run_id]
    assert run.status == "completed"
    assert completion_problems([run_id]) == []
    [owner] = starts(run_id, step)
    assert owner in process.descendants()
    return owner


def test_a_step_requiring_a_capability_waits_for_a_worker_that_has_it(stack):
    plain = worker(stack, "worker-plain")
    assert "routes (django-q2 clusters): " in plain.log_tail()
    assert "default+cuda" not in plain.log_tail()
    [run_id] = stack.start_runs("acceptance_cuda", [{}])
    stack.wait_for(
        "the default queue's branch to finish around the cuda step",
        lambda: status(run_id, "report") == "completed",
        timeout=RUN_TIMEOUT,
        run_ids=[run_id],
    )
    assert status(run_id, "train") == "ready"
    assert status(run_id, "done") == "pending"
    assert starts(run_id, "train") == []
    with ON_WORKERS:
        waiting = [entry.as_dict() for entry in workflows.explain(run_id).waiting_on]
    assert [(entry["kind"], entry["step"]) for entry in waiting] == [("worker", "train")]
    assert (waiting[0]["queue"], waiting[0]["requires"]) == ("default", ["cuda"])
    assert waiting[0]["message"] == "waiting for a worker of queue 'default' with capability cuda"

    cuda = worker(stack, "worker-cuda", "--capability", "cuda")
    assert "default+cuda (queue 'default' requiring cuda)" in cuda.log_tail()

    completed_on(stack, run_id, "train", cuda)
    assert all(pid in plain.descendants() for pid in starts(run_id, "prepare"))


def test_a_step_of_a_queue_runs_only_on_a_worker_serving_that_queue(stack):
    default = worker(stack, "worker-default")
    [run_id] = stack.start_runs("acceptance_gpu", [{}])
    stack.wait_for(
        "the gpu step to be ready while no gpu worker runs",
        lambda: status(run_id, "render") == "ready",
        timeout=STARTUP_TIMEOUT,
        run_ids=[run_id],
    )
    with ON_WORKERS:
        [entry] = workflows.explain(run_id).waiting_on
    assert (entry.kind, entry.step, entry.details["queue"]) == ("worker", "render", "gpu")

    gpu = worker(stack, "worker-gpu", "--queue", "gpu")
    assert "queues: gpu\n" in gpu.log_tail()

    owner = completed_on(stack, run_id, "render", gpu)
    assert owner not in default.descendants()
    with ON_WORKERS:
        assert workflows.explain(run_id).waiting_on == ()


def test_a_stopped_worker_withdraws_its_presence(stack):
    process = worker(stack, "worker-gpu", "--queue", "gpu", "--capability", "cuda")
    [row] = WorkerPresence.objects.all()
    assert (row.queues, row.capabilities) == (["gpu"], ["cuda"])
    stack.processes.stop(process)
    assert process.popen.returncode == 0
    assert not WorkerPresence.objects.exists()


def test_a_dead_sentinel_stops_the_worker_with_an_error(stack):
    """One cluster per route: when one route's sentinel dies, the command stops the
    other clusters and exits non-zero, so the process manager restarts the worker."""
    process = worker(stack, "worker-two-routes", "--queue", "default", "--queue", "gpu")
    sentinels = [stat.pid for stat in all_stats() if stat.ppid == process.pid and live(stat)]
    assert len(sentinels) == 2, process.log_tail()
    process.watched = False
    os.kill(sentinels[0], signal.SIGKILL)
    stack.wait_for("the worker to exit", lambda: not process.running(), timeout=STARTUP_TIMEOUT)

    assert process.popen.returncode != 0
    assert "a cluster's sentinel died" in process.log_tail()
    assert not live(proc_stat(sentinels[1]))
    # It did not stop cleanly: its presence stays, and turns gone.
    assert WorkerPresence.objects.filter(name__endswith=f":{process.pid}").exists()
