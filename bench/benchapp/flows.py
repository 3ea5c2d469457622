"""Benchmark workflows, discovered in every process that uses ``bench.settings``.

The worker and sweeper subprocesses of ``bench/workers.py`` import them through
Flowsite's autodiscovery of ``flows`` modules, so the benchmark script and its workers
agree on the same (name, version) definitions.
"""

from __future__ import annotations

from datetime import datetime

from bench.handlers import noop_chain
from workflows import Sleep, Workflow
from workflows.context import Context


def due_at(ctx: Context) -> datetime:
    """The moment the benchmark chose for this run's timer (ISO 8601 in the input)."""
    return datetime.fromisoformat(ctx.input["due_at"])


# Ten no-op tasks in a chain: the cost measured is the engine's and the queue's.
WorkersNoop10 = noop_chain("bench_workers_noop_10", 10, __name__)


class WorkersSleepUntil(Workflow):
    """One durable sleep until ``input["due_at"]``: the run completes when its timer fires."""

    name = "bench_workers_sleep_until"
    version = 1

    wait = Sleep(until=due_at)
