"""Workflows of the routing acceptance tests (``test_routing_workers.py``).

Imported by the app's ``ready()`` so that every worker process registers them, and so
that a worker with capability ``cuda`` finds their routes among those it serves.
"""

from __future__ import annotations

from tests.acceptance.flowapp.flows import HANDLERS, LEASE, PATIENT, task
from workflows import Task, Workflow


class Cuda(Workflow):
    """A branch of default work beside a step requiring ``cuda``, then their join."""

    name = "acceptance_cuda"

    prepare = task()
    report = task("work", "prepare")
    train = Task(f"{HANDLERS}.work", timeout=LEASE, retry=PATIENT, requires={"cuda"}, after=[])
    done = task("work", "report", "train")


class Gpu(Workflow):
    """A step of queue ``gpu``, then a step of the default queue."""

    name = "acceptance_gpu"

    render = task("work", queue="gpu")
    publish = task()
