"""Rate of bulk operator verbs on SQLite: a dry run, and ``cancel`` applied run by run.

What it measures, in one process on a fresh temporary SQLite file configured like the
demo project (the same setup as ``bench/throughput.py``):

* **dry run, runs/s**: ``workflows.bulk("cancel", <queryset>)`` over N runs (default
  10,000): the selection read by keyset chunks of 500 and each run's status judged by
  the verb's guard. The runs are inserted with ``bulk_create`` as ``waiting`` rows: a dry
  run reads only ids and statuses, so what else a run holds does not change its cost;
* **applied cancel, runs/s**: ``workflows.bulk("cancel", <queryset>, dry_run=False,
  compensate=False)`` over M real runs (default 2,000), each started with
  ``start_run`` and run inline until it waits for a signal after one completed step, so
  every cancel stops real work: its waiting step, its timers, its history;
* **statements per cancelled run**, counted over a separate, untimed batch.

Why: an operator cancelling thousands of runs wants to know whether that takes seconds
or an hour, and whether the dry run is cheap enough to run first every time. Applying
is one transaction per run (``cancel_run`` and then its children), so its rate is
bounded by the engine's transition rate; the dry run is a few reads per 500 runs.

The script prints figures and never asserts timings. It exits non-zero only when the
bulk did not do what it should (a run not counted, not cancelled, or failed).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import measured_in_fresh_sqlite, print_header, print_table  # noqa: E402
from workflows import Task, WaitForSignal, Workflow  # noqa: E402

HELD = "bench_bulk_held"
DRY = "bench_bulk_dry"
TIMED_KEY = "bench-timed"
QUERIES_KEY = "bench-queries"


class BenchBulkHeld(Workflow):
    """One no-op task, then a wait for a signal that never comes: a run to cancel."""

    name = HELD
    version = 1

    work = Task("bench.handlers.noop")
    go = WaitForSignal("go")


@dataclass
class Figures:
    """Everything measured in one invocation."""

    dry_runs: int
    dry_seconds: float
    dry_eligible: int
    applied_runs: int
    applied_seconds: float
    applied_done: int
    applied_failed: int
    cancelled: int
    query_runs: int
    query_statements: int

    @property
    def dry_per_second(self) -> float:
        return self.dry_runs / self.dry_seconds

    @property
    def applied_per_second(self) -> float:
        return self.applied_runs / self.applied_seconds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--dry-runs", type=int, default=10_000, help="runs of the dry run (default 10,000)"
    )
    parser.add_argument(
        "--applied-runs",
        type=int,
        default=2_000,
        help="runs cancelled by the applied bulk (default 2,000)",
    )
    parser.add_argument(
        "--query-runs",
        type=int,
        default=50,
        help="runs of the untimed batch whose statements are counted (default 50)",
    )
    args = parser.parse_args(argv)
    if min(args.dry_runs, args.applied_runs, args.query_runs) < 1:
        parser.error("--dry-runs, --applied-runs and --query-runs must be positive")
    return args


def insert_waiting_runs(count: int) -> None:
    """Insert ``count`` ``waiting`` runs of a workflow of their own, 1,000 rows a statement."""
    from workflows.models import Run
    from workflows.status import RunStatus

    Run.objects.bulk_create(
        (
            Run(workflow_name=DRY, workflow_version=1, snapshot={}, status=RunStatus.WAITING)
            for _ in range(count)
        ),
        batch_size=1_000,
    )


def start_held_runs(count: int, business_key: str) -> None:
    """Start ``count`` runs of the held workflow and run them until each waits."""
    from workflows import start_run
    from workflows.models import Run
    from workflows.testing import run_pending

    for index in range(count):
        start_run(BenchBulkHeld, {"n": index}, business_key=business_key)
    run_pending()
    waiting = Run.objects.filter(business_key=business_key, status="waiting").count()
    if waiting != count:
        raise SystemExit(f"setup: {waiting} of {count} held runs are waiting")


def cancel_all(business_key: str) -> tuple[float, int, int, int]:
    """Cancel every run with ``business_key`` in one bulk; return seconds, runs, done, failed."""
    import workflows
    from workflows.models import Run

    began = time.perf_counter()
    result = workflows.bulk(
        "cancel", Run.objects.filter(business_key=business_key), dry_run=False, compensate=False
    )
    return time.perf_counter() - began, result.matched, result.done, result.failed


def count_statements(runs: int) -> int:
    """Statements (``BEGIN``/``COMMIT`` excluded) of an applied bulk cancel of ``runs`` runs."""
    from django.db import connection

    control = {"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"}
    statements = 0

    def counted(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal statements
        statements += sql.split(None, 1)[0].upper() not in control
        return execute(sql, params, many, context)

    start_held_runs(runs, QUERIES_KEY)
    with connection.execute_wrapper(counted):
        cancel_all(QUERIES_KEY)
    return statements


def measure(args: argparse.Namespace) -> Figures:
    import workflows
    from workflows.models import Run

    # Untimed batch first: counts statements and warms imports, caches and the connection.
    query_statements = count_statements(args.query_runs)

    insert_waiting_runs(args.dry_runs)
    began = time.perf_counter()
    dry = workflows.bulk("cancel", Run.objects.filter(workflow_name=DRY))
    dry_seconds = time.perf_counter() - began

    start_held_runs(args.applied_runs, TIMED_KEY)
    applied_seconds, applied_runs, done, failed = cancel_all(TIMED_KEY)
    cancelled = Run.objects.filter(business_key=TIMED_KEY, status="cancelled").count()
    return Figures(
        dry_runs=dry.matched,
        dry_seconds=dry_seconds,
        dry_eligible=dry.eligible,
        applied_runs=applied_runs,
        applied_seconds=applied_seconds,
        applied_done=done,
        applied_failed=failed,
        cancelled=cancelled,
        query_runs=args.query_runs,
        query_statements=query_statements,
    )


def report(figures: Figures, facts: dict[str, str]) -> None:
    rows = [
        ("dry run: runs/s", f"{figures.dry_per_second:,.0f}"),
        ("applied cancel: runs/s", f"{figures.applied_per_second:,.0f}"),
        ("statements per cancelled run", f"{figures.query_statements / figures.query_runs:.1f}"),
    ]
    print_header("Flowsite bulk operator verbs (bench/bulk.py)", facts)
    print(
        f"  dry run of cancel over {figures.dry_runs:,} runs in {figures.dry_seconds:.3f}s; "
        f"cancel (compensate=False) applied to {figures.applied_runs:,} waiting runs of "
        f"{HELD} in {figures.applied_seconds:.3f}s"
    )
    print(f"  statements counted over {figures.query_runs} further runs, not BEGIN/COMMIT")
    print_table(rows)
    print(
        f"  check: dry run {figures.dry_eligible:,}/{figures.dry_runs:,} eligible; applied "
        f"{figures.applied_done:,} done, {figures.applied_failed} failed, "
        f"{figures.cancelled:,}/{figures.applied_runs:,} cancelled"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    figures, facts = measured_in_fresh_sqlite(None, lambda: measure(args))
    report(figures, facts)
    if (
        figures.dry_eligible != args.dry_runs
        or figures.applied_done != args.applied_runs
        or figures.cancelled != args.applied_runs
    ):
        print("FAILED: the bulk did not count or cancel every run", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
