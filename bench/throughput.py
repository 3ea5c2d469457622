"""Inline throughput of the Flowsite engine on SQLite, next to a plain Django ORM baseline.

What it measures, in one process on a fresh temporary SQLite file configured exactly like
the demo project (``flowsite.database.sqlite_database``: WAL, busy timeout,
``BEGIN IMMEDIATE``, ``synchronous=NORMAL`` unless ``--synchronous`` says otherwise):

* **runs started/s**: ``workflows.start_run`` of a 10-step no-op workflow, N times;
* **engine step transitions/s**: those N runs executed in-process by
  ``workflows.testing.run_pending`` (the worker chains straight into each run's next step),
  counted as steps completed per second and checked against the database; with
  ``--sqlite-limit``, also as a ratio to the peer's ORM ceiling (below);
* **engine steps/s, starts included**: the same steps over the time to start the runs
  and execute them, the span a benchmark with worker processes times;
* **ORM CAS+insert transactions/s**: the cheapest honest transaction of the same shape, a
  ``transaction.atomic()`` block doing one compare-and-set ``UPDATE`` on a version column
  plus one ``INSERT`` of an event row, on the engine's own ``Step`` and ``Event`` tables
  through this project's backend, written as the ``sqlite_limit`` peer writes its own
  (which uses two narrow tables and Django's stock backend; with ``--sqlite-limit`` the
  ratio baseline / peer says what the wider tables and the write lock cost);
* **queries and transactions per step**, captured over a separate, smaller batch of runs;
* **fan-out items executed/s**: one run fanning out over 10,000 no-op items, unbatched
  (``batch_size=1``, one transaction per item) and batched (``--fanout-batch-size``,
  default 50: one transaction per batch), with their ratio to the ORM baseline and, with
  ``--sqlite-limit``, to the ORM ceiling of ``../shared/peers/sqlite_limit``
  (``django_wal_normal``) measured right after, in the same sitting.

Why: every step transition is a small write transaction, so on SQLite the engine's rate
is bounded by the rate of such transactions. The ratio engine / ORM says how much of
that budget the engine's own bookkeeping (extra reads, status rows, events) spends.

The script prints figures and never asserts timings. It exits non-zero only when the
runs did not complete as they should (not every run ``completed``, or a step missing).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import (  # noqa: E402  (needs the repository on sys.path)
    SYNCHRONOUS_NAMES,
    measured_in_fresh_sqlite,
    print_header,
    print_table,
)
from bench.handlers import noop_chain  # noqa: E402
from workflows import FanOut, Workflow  # noqa: E402

STEPS_PER_RUN = 10
NOOP = "bench.handlers.noop"
TIMED_KEY = "bench-timed"
# Rows the ORM baseline updates in turn, as many as the sqlite_limit peer's.
BASELINE_STEPS = 100
QUERIES_KEY = "bench-queries"


BenchNoop10 = noop_chain("bench_noop_10", STEPS_PER_RUN, __name__)


assert len(BenchNoop10.nodes) == STEPS_PER_RUN


def fanout_items(ctx: Any) -> list[int]:
    return list(range(ctx.input["items"]))


class BenchFanOut(Workflow):
    """One fan-out step over N no-op items: the cost of an item, not of a step."""

    name = "bench_fanout"
    version = 1

    items = FanOut(NOOP, items=fanout_items, max_parallel=100)


def batched_fanout(batch_size: int) -> type[Workflow]:
    """:class:`BenchFanOut` with ``batch_size`` items claimed and recorded per transaction."""
    node = FanOut(
        NOOP, items=fanout_items, max_parallel=max(100, batch_size), batch_size=batch_size
    )
    return type(
        "BenchFanOutBatched",
        (Workflow,),
        {"__module__": __name__, "name": f"bench_fanout_batched_{batch_size}", "items": node},
    )


@dataclass
class FanOutFigures:
    """One run fanning out over ``items`` no-op items, executed inline."""

    batch_size: int
    items: int
    start_seconds: float
    execute_seconds: float
    items_completed: int
    completed: bool

    @property
    def items_per_second(self) -> float:
        return self.items_completed / self.execute_seconds


@dataclass
class QueryCounts:
    """SQL statements and transactions of an untimed batch of runs, started then executed."""

    runs: int
    steps: int
    start_sql: int
    start_transactions: int
    execute_sql: int
    execute_transactions: int


@dataclass
class Figures:
    """Everything measured in one invocation."""

    runs: int
    start_seconds: float
    execute_seconds: float
    steps_completed: int
    runs_completed: int
    step_attempts: int
    rounds: int
    orm_transactions: int
    orm_seconds: float
    queries: QueryCounts
    fanout: FanOutFigures
    fanout_batched: FanOutFigures

    @property
    def starts_per_second(self) -> float:
        return self.runs / self.start_seconds

    @property
    def steps_per_second(self) -> float:
        return self.steps_completed / self.execute_seconds

    @property
    def steps_with_starts_per_second(self) -> float:
        """Starting the runs and executing them: what a window with workers also holds."""
        return self.steps_completed / (self.start_seconds + self.execute_seconds)

    @property
    def orm_per_second(self) -> float:
        return self.orm_transactions / self.orm_seconds

    @property
    def ratio(self) -> float:
        return self.steps_per_second / self.orm_per_second


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=200, help="runs to time (default 200)")
    parser.add_argument(
        "--steps",
        type=int,
        default=STEPS_PER_RUN,
        choices=[STEPS_PER_RUN],
        help="steps per run (fixed: 10)",
    )
    parser.add_argument(
        "--synchronous",
        type=str.upper,
        choices=sorted(SYNCHRONOUS_NAMES.values()),
        default=None,
        help="SQLite synchronous level (sets FLOWSITE_SQLITE_SYNCHRONOUS; default NORMAL)",
    )
    parser.add_argument(
        "--orm-transactions",
        type=int,
        default=5000,
        help="ORM baseline transactions to time (default 5000)",
    )
    parser.add_argument(
        "--query-runs",
        type=int,
        default=20,
        help="runs of the untimed batch whose queries are counted (default 20)",
    )
    parser.add_argument(
        "--fanout-items",
        type=int,
        default=10_000,
        help="items of the single fan-out run (default 10,000)",
    )
    parser.add_argument(
        "--fanout-batch-size",
        type=int,
        default=50,
        help="batch_size of the batched fan-out run (default 50)",
    )
    parser.add_argument(
        "--sqlite-limit",
        type=Path,
        default=None,
        metavar="RUN_SH",
        help="the sqlite_limit peer's run.sh: run it afterwards and print the engine's "
        "step rate and the fan-outs' item rates as ratios to its django_wal_normal ceiling",
    )
    args = parser.parse_args(argv)
    numbers = (args.runs, args.orm_transactions, args.query_runs, args.fanout_items)
    if min(*numbers, args.fanout_batch_size) < 1:
        parser.error(
            "--runs, --orm-transactions, --query-runs, --fanout-items and "
            "--fanout-batch-size must be positive"
        )
    return args


def start_runs(count: int, business_key: str) -> float:
    """Start ``count`` runs and return the seconds it took."""
    from workflows import start_run

    began = time.perf_counter()
    for index in range(count):
        start_run(BenchNoop10, {"n": index}, business_key=business_key)
    return time.perf_counter() - began


def execute_pending() -> tuple[float, int, int]:
    """Run every ready step inline; return seconds, step attempts and rounds."""
    from workflows.testing import run_pending

    began = time.perf_counter()
    result = run_pending()
    return time.perf_counter() - began, result.steps, result.rounds


def completed_counts(business_key: str) -> tuple[int, int]:
    """Count the completed runs and completed steps of one batch, from the database."""
    from workflows.models import Run, Step
    from workflows.status import RunStatus, StepStatus

    runs = Run.objects.filter(business_key=business_key, status=RunStatus.COMPLETED).count()
    steps = Step.objects.filter(run__business_key=business_key, status=StepStatus.COMPLETED).count()
    return runs, steps


def count_queries(runs: int) -> QueryCounts:
    """Start and execute ``runs`` runs untimed, counting SQL statements and transactions.

    Transaction control (``BEGIN IMMEDIATE``, ``COMMIT``) is counted apart from the SQL
    statements: a transaction is counted by its ``BEGIN``.
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as started:
        start_runs(runs, QUERIES_KEY)
    with CaptureQueriesContext(connection) as executed:
        execute_pending()
    completed_runs, completed_steps = completed_counts(QUERIES_KEY)
    if completed_runs != runs:
        raise SystemExit(f"query batch: {completed_runs} of {runs} runs completed")

    def split(captured: CaptureQueriesContext) -> tuple[int, int]:
        verbs = [query["sql"].split(None, 1)[0].upper() for query in captured.captured_queries]
        control = {"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"}
        return sum(verb not in control for verb in verbs), verbs.count("BEGIN")

    start_sql, start_transactions = split(started)
    execute_sql, execute_transactions = split(executed)
    return QueryCounts(
        runs=runs,
        steps=completed_steps,
        start_sql=start_sql,
        start_transactions=start_transactions,
        execute_sql=execute_sql,
        execute_transactions=execute_transactions,
    )


def orm_baseline(transactions: int) -> float:
    """Time ``transactions`` times: CAS ``UPDATE`` of a Step's version + ``INSERT`` of an Event.

    Returns the seconds taken. The statements have the shape of the ``sqlite_limit``
    peer's (``django_wal_normal``): the new version and the time computed in Python,
    foreign keys given as ids, over :data:`BASELINE_STEPS` rows in turn. Written with
    ``F("version") + 1`` and ``Now()`` the same transaction costs Django about 140 us more
    to compile (``docs/benchmarks.md``), which measures the ORM, not the database. The
    tables are the engine's own, so row width and indexes match what a step writes;
    that, and this backend's write lock, are all that still differ from the peer.
    """
    from django.db import transaction
    from django.utils import timezone

    from workflows.models import Event, Run, Step

    run = Run.objects.create(workflow_name="bench_orm_baseline", workflow_version=1, snapshot={})
    steps = Step.objects.bulk_create(
        Step(run=run, name=f"cas-{index}", kind="task") for index in range(BASELINE_STEPS)
    )
    versions = {step.pk: step.version for step in steps}
    began = time.perf_counter()
    for index in range(transactions):
        step_id = steps[index % BASELINE_STEPS].pk
        version = versions[step_id]
        with transaction.atomic():
            updated = Step.objects.filter(pk=step_id, version=version).update(
                version=version + 1, updated_at=timezone.now()
            )
            if updated != 1:
                raise SystemExit(f"ORM baseline: compare-and-set {index} matched {updated} rows")
            Event.objects.create(
                run_id=run.pk, step_id=step_id, type="bench.cas", payload={"v": version}
            )
        versions[step_id] = version + 1
    return time.perf_counter() - began


def measure(args: argparse.Namespace) -> Figures:
    # Untimed batch first: counts queries and warms imports, caches and the connection.
    queries = count_queries(args.query_runs)

    start_seconds = start_runs(args.runs, TIMED_KEY)
    execute_seconds, attempts, rounds = execute_pending()
    runs_completed, steps_completed = completed_counts(TIMED_KEY)

    orm_seconds = orm_baseline(args.orm_transactions)
    fanout = measure_fanout(BenchFanOut, args.fanout_items, batch_size=1)
    batched = batched_fanout(args.fanout_batch_size)
    fanout_batched = measure_fanout(batched, args.fanout_items, batch_size=args.fanout_batch_size)
    return Figures(
        runs=args.runs,
        start_seconds=start_seconds,
        execute_seconds=execute_seconds,
        steps_completed=steps_completed,
        runs_completed=runs_completed,
        step_attempts=attempts,
        rounds=rounds,
        orm_transactions=args.orm_transactions,
        orm_seconds=orm_seconds,
        queries=queries,
        fanout=fanout,
        fanout_batched=fanout_batched,
    )


def measure_fanout(workflow: type[Workflow], items: int, *, batch_size: int) -> FanOutFigures:
    """Start one run over ``items`` items (storing them), then execute it inline."""
    import workflows
    from workflows.testing import run_pending

    began = time.perf_counter()
    run = workflows.start_run(workflow, {"items": items})
    started = time.perf_counter()
    run_pending()
    finished = time.perf_counter()
    run.refresh_from_db()
    step = run.steps.get()
    return FanOutFigures(
        batch_size=batch_size,
        items=items,
        start_seconds=started - began,
        execute_seconds=finished - started,
        items_completed=step.items_completed,
        completed=run.status == "completed" and len(step.output) == items,
    )


def sqlite_limit_ceiling(run_sh: Path) -> float:
    """The peer's Django ORM CAS+insert ceiling (``django_wal_normal.tx_per_sec``)."""
    out = subprocess.run([str(run_sh)], check=True, capture_output=True, text=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["django_wal_normal"]["tx_per_sec"])


def report(figures: Figures, facts: dict[str, str], ceiling: float | None = None) -> None:
    q, f, b = figures.queries, figures.fanout, figures.fanout_batched
    rows = [
        ("runs started/s", f"{figures.starts_per_second:,.0f}"),
        ("engine step transitions/s", f"{figures.steps_per_second:,.0f}"),
        ("engine steps/s, starts included", f"{figures.steps_with_starts_per_second:,.0f}"),
        ("ORM CAS+insert transactions/s", f"{figures.orm_per_second:,.0f}"),
        ("ratio engine / ORM", f"{figures.ratio:.2f}"),
        ("queries per step (start + execute)", f"{(q.start_sql + q.execute_sql) / q.steps:.2f}"),
        ("queries per step (execute only)", f"{q.execute_sql / q.steps:.2f}"),
        ("transactions per step (execute only)", f"{q.execute_transactions / q.steps:.2f}"),
        ("queries per run start (1 transaction)", f"{q.start_sql / q.runs:.1f}"),
        ("ORM baseline queries per transaction", "2"),
        ("fan-out: items stored/s (at start)", f"{f.items / f.start_seconds:,.0f}"),
        ("fan-out: items executed/s", f"{f.items_per_second:,.0f}"),
        (f"fan-out, batch_size {b.batch_size}: items executed/s", f"{b.items_per_second:,.0f}"),
        ("fan-out: batched / unbatched", f"{b.items_per_second / f.items_per_second:.2f}"),
        ("fan-out: batched / ORM baseline", f"{b.items_per_second / figures.orm_per_second:.2f}"),
    ]
    if ceiling is not None:
        rows += [
            ("peer sqlite_limit django_wal_normal tx/s", f"{ceiling:,.0f}"),
            ("ORM baseline / peer ORM ceiling", f"{figures.orm_per_second / ceiling:.2f}"),
            ("engine steps / peer ORM ceiling", f"{figures.steps_per_second / ceiling:.2f}"),
            ("fan-out: unbatched / peer ORM ceiling", f"{f.items_per_second / ceiling:.2f}"),
            ("fan-out: batched / peer ORM ceiling", f"{b.items_per_second / ceiling:.2f}"),
        ]
    print_header("Flowsite inline throughput (bench/throughput.py)", facts)
    print(
        f"  workload: {figures.runs} runs of {BenchNoop10.name} ({STEPS_PER_RUN} no-op tasks "
        f"in a chain)\n  started in {figures.start_seconds:.3f}s, executed in "
        f"{figures.execute_seconds:.3f}s ({figures.step_attempts} attempts, "
        f"{figures.rounds} rounds of run_pending)"
    )
    print(
        f"  ORM baseline: {figures.orm_transactions} transactions (CAS UPDATE of one of "
        f"{BASELINE_STEPS} Steps + INSERT of an Event) in {figures.orm_seconds:.3f}s; "
        f"queries counted over {q.runs} further runs ({q.steps} steps), not counting "
        "BEGIN/COMMIT"
    )
    print_table(rows)
    print(
        f"  check: {figures.runs_completed}/{figures.runs} runs completed, "
        f"{figures.steps_completed}/{figures.runs * STEPS_PER_RUN} steps completed; "
        f"fan-out {f.items_completed}/{f.items} items completed, batched "
        f"{b.items_completed}/{b.items}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    figures, facts = measured_in_fresh_sqlite(args.synchronous, lambda: measure(args))
    ceiling = sqlite_limit_ceiling(args.sqlite_limit) if args.sqlite_limit else None
    report(figures, facts, ceiling)
    expected_steps = args.runs * STEPS_PER_RUN
    if (
        figures.runs_completed != args.runs
        or figures.steps_completed != expected_steps
        or not figures.fanout.completed
        or not figures.fanout_batched.completed
    ):
        print("FAILED: not every run and step completed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
