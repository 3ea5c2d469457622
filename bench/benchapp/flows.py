"""Benchmark workflows, discovered in every process that uses ``bench.settings``.

The worker and sweeper subprocesses of ``bench/workers.py`` import them through
Flowsite's autodiscovery of ``flows`` modules, so the benchmark script and its workers
agree on the same (name, version) definitions.
"""

from __future__ import annotations

from datetime import datetime

from workflows import Sleep, Task, Workflow
from workflows.context import Context

NOOP = "bench.handlers.noop"


def due_at(ctx: Context) -> datetime:
    """The moment the benchmark chose for this run's timer (ISO 8601 in the input)."""
    return datetime.fromisoformat(ctx.input["due_at"])


class WorkersNoop10(Workflow):
    """Ten no-op tasks in a chain: the cost measured is the engine's and the queue's."""

    name = "bench_workers_noop_10"
    version = 1

    step_01 = Task(NOOP)
    step_02 = Task(NOOP)
    step_03 = Task(NOOP)
    step_04 = Task(NOOP)
    step_05 = Task(NOOP)
    step_06 = Task(NOOP)
    step_07 = Task(NOOP)
    step_08 = Task(NOOP)
    step_09 = Task(NOOP)
    step_10 = Task(NOOP)


class WorkersSleepUntil(Workflow):
    """One durable sleep until ``input["due_at"]``: the run completes when its timer fires."""

    name = "bench_workers_sleep_until"
    version = 1

    wait = Sleep(until=due_at)
