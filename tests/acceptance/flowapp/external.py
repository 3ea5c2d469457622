"""Workflows of the external-work acceptance tests (``test_external_workers.py``): an
external step between two in-process ones, leased for two seconds, with attempts to
spare for every kill the chaos test makes."""

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
