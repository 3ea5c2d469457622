"""Workflows of the external-work acceptance tests: for ``test_external_workers.py``, an
external step between two in-process ones, leased for two seconds, with attempts to
spare for every kill the chaos test makes; for ``test_external_worker_node.py``, a step
the guide's Node worker does, leased for six seconds so that it heartbeats several
times within one attempt."""

from __future__ import annotations

from datetime import timedelta

from tests.acceptance.flowapp.flows import task
from workflows import Retry, Task, Workflow

# The chaos test kills an attempt at most twice; a lease lost to a revoke costs none.
OUTSIDE_RETRY = Retry(max_attempts=6, initial_interval=timedelta(milliseconds=100))


class Outside(Workflow):
    """Prepared in process, charged by an outside worker, reported in process."""

    name = "acceptance_outside"

    prepare = task()
    charge = Task(external=True, queue="outside", timeout=timedelta(seconds=2), retry=OUTSIDE_RETRY)
    report = task("work", "charge")


NODE_QUEUE = "node_labels"


class NodeLabels(Workflow):
    """One step done by the Node worker of docs/guide/external-workers.md."""

    name = "acceptance_node_labels"

    print_label = Task(
        external=True,
        queue=NODE_QUEUE,
        retry=Retry(max_attempts=2, initial_interval=timedelta(0)),
        timeout=timedelta(seconds=6),
    )
