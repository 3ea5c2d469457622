"""Runs a test starts from: started and run inline until nothing more is ready."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import workflows
from workflows.engine import claim_step
from workflows.engine.lease import Lease
from workflows.models import Run, Step
from workflows.testing import run_pending


def run_inline(*args: Any, until: datetime | None = None, **options: Any) -> Run:
    """Start a run (the arguments of ``workflows.start_run``), run its ready work inline
    until nothing more is ready (``run_pending``; with ``until``, timers due by then fire
    too) and return it read again: ended, or waiting on what no step of it can do (a
    gate, a signal, a later timer)."""
    run = workflows.start_run(*args, **options)
    run_pending(until=until)
    run.refresh_from_db()
    return run


def waiting_step(*args: Any, step: str, **options: Any) -> Step:
    """The step named ``step`` of a new run (the arguments of ``workflows.start_run``)
    once run inline, checked to be waiting (at a gate, for a signal or a callback)."""
    run = workflows.start_run(*args, **options)
    run_pending()
    waiting = run.steps.get(name=step)
    assert waiting.status == "waiting"
    return waiting


def claimed(run: Run, step: str, worker: str) -> Lease:
    """The lease of the run's step named ``step``, claimed by ``worker`` as a worker
    would claim it."""
    return claim_step(Step.objects.get(run=run, name=step).pk, worker)
