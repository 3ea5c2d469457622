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

# The same chain under limits that never bind (``bench/workers.py --limits``): what the
# limits' own bookkeeping costs. A run's steps follow one another, so one slot per run
# is never contended; the rate allows far more starts than the workers make.
NON_BINDING_RATE = "1000/s"


def per_run_key(ctx: Context) -> str:
    """A concurrency key of each run's own: as many keys as runs."""
    return f"run:{ctx.run_id}"


WorkersKeyed10 = noop_chain(
    "bench_workers_keyed_10", 10, __name__, concurrency_key=per_run_key, max_concurrent=1
)
WorkersRated10 = noop_chain("bench_workers_rated_10", 10, __name__, rate_limit=NON_BINDING_RATE)


class WorkersSleepUntil(Workflow):
    """One durable sleep until ``input["due_at"]``: the run completes when its timer fires."""

    name = "bench_workers_sleep_until"
    version = 1

    wait = Sleep(until=due_at)
