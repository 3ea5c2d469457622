"""Retention under load: purging a large history while workers run live steps.

One command (``python bench/retention.py``, PostgreSQL by default): a fresh database
(``purge_bench`` on the server at 127.0.0.1:5432, or ``--database sqlite``: a temporary
file) is migrated and filled with a history of ``--runs`` completed top-level runs
(default 500,000) ended 30 days ago and more, each with ``--steps`` steps and
``--events`` events, written with bulk ``INSERT ... SELECT`` over ``generate_series``
(a recursive series on SQLite) so that building it takes a minute, not hours. Then, as
deployed, ``manage.py workflows_worker`` (2 workers, django-q2's ORM broker) and
``manage.py workflows_sweeper`` run, and this process starts runs of a chain of 10
no-op steps at a steady rate (``--rate`` runs/s):

1. **without purge**, for ``--seconds``: the live step latency, the gap between the
   start of one step and the start of the next in the same run (database clock: one
   step's handler, its fenced completion and the claim of the next);
2. **during the purge**: ``manage.py workflows_purge --older-than 20 --json`` runs in a
   process of its own while the load goes on, until it has deleted every old run; the
   same latency over the runs started meanwhile, and the purge's own report (runs/s,
   transaction time p50/p99/max, from its batches).

It prints the figures, the step latency p99 during ÷ without (the goal is ≤ 2), the
event table's size before and after, and the load average (``uptime``) with each phase.
Figures only: nothing is asserted. Every process it starts is stopped at the end, also on
errors and Ctrl-C, and the database is dropped.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: import bench.workers from the repository
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workers import (
    MANAGE,
    NOOP_WORKFLOW,
    REPO_ROOT,
    BenchError,
    Processes,
    Spread,
    bench_env,
    database_facts,
    load_average,
    ms,
    postgres_database,
    setup_django,
)

BENCH_DB = "purge_bench"
# The history ends this long ago; the purge's cutoff (20 days) keeps every live run.
HISTORY_AGE_DAYS = 30
PURGE_OLDER_THAN_DAYS = "20"
PURGE_TIMEOUT = 3600.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--runs", type=int, default=500_000, help="old top-level runs")
    parser.add_argument("--steps", type=int, default=3, help="steps of each old run")
    parser.add_argument("--events", type=int, default=10, help="events of each old run")
    parser.add_argument("--rate", type=float, default=3.0, help="live runs started per second")
    parser.add_argument(
        "--seconds", type=float, default=40.0, help="length of the phase without purge"
    )
    parser.add_argument("--batch-ms", type=float, default=None, help="the purge's --batch-ms")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    return parser.parse_args(argv)


# -- the history ---------------------------------------------------------------------------


def _column_values(model: Any, overrides: dict[str, str]) -> tuple[list[str], list[str], list]:
    """The columns of ``model`` and, for each, its SQL expression: ``overrides`` by field
    name, else the field's default as a parameter, else NULL."""
    from django.db import connection
    from django.db.models import NOT_PROVIDED
    from django.db.models.fields import AutoFieldMixin

    columns, expressions, params = [], [], []
    for field in model._meta.concrete_fields:
        if field.name in overrides:
            expression = overrides[field.name]
        elif isinstance(field, AutoFieldMixin) or field.db_default is not NOT_PROVIDED:
            continue
        elif field.has_default():
            expression = "%s"
            params.append(field.get_db_prep_save(field.get_default(), connection))
        elif field.null:
            expression = "NULL"
        else:
            raise BenchError(f"{model.__name__}.{field.name}: no value to insert")
        columns.append(connection.ops.quote_name(field.column))
        expressions.append(expression)
    return columns, expressions, params


def insert_select(model: Any, overrides: dict[str, str], source: str) -> None:
    from django.db import connection, transaction

    columns, expressions, params = _column_values(model, overrides)
    sql = (
        f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({', '.join(columns)}) "
        f"SELECT {', '.join(expressions)} {source}"
    )
    # %s in the expressions are the defaults' parameters (in column order).
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def build_history(database: str, runs: int, steps: int, events: int) -> float:
    """``runs`` completed top-level runs ended ``HISTORY_AGE_DAYS`` days ago and before
    (one a second further back), with their steps and events; seconds it took."""
    from workflows.models import Event, Run, Step

    began = time.monotonic()
    if database == "postgres":
        run_id = "('00000000-0000-4000-8000-' || lpad(to_hex(g.n), 12, '0'))::uuid"
        ended = f"now() - interval '{HISTORY_AGE_DAYS} days' - g.n * interval '1 second'"
        series = f"FROM generate_series(1, {runs}) AS g(n)"

        def times(count: int, name: str) -> str:
            return f"CROSS JOIN generate_series(1, {count}) AS {name}(i)"
    else:
        run_id = "printf('%032x', g.n)"
        ended = (
            f"strftime('%Y-%m-%d %H:%M:%f', 'now', '-{HISTORY_AGE_DAYS} days', "
            f"'-' || g.n || ' seconds')"
        )
        series = (
            f"FROM (WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
            f"WHERE n < {runs}) SELECT n FROM s) AS g"
        )

        def times(count: int, name: str) -> str:
            return (
                f"CROSS JOIN (WITH RECURSIVE t(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM t "
                f"WHERE i < {count}) SELECT i FROM t) AS {name}"
            )

    common = {"created_at": ended, "updated_at": ended}
    insert_select(
        Run,
        {
            "id": run_id,
            "workflow_name": "'bench_retention_history'",
            "workflow_version": "1",
            "snapshot": "'{}'",
            "status": "'completed'",
            "started_at": ended,
            "finished_at": ended,
            **common,
        },
        series,
    )
    print(f"  {runs:,} runs written ({time.monotonic() - began:.0f}s)", flush=True)
    insert_select(
        Step,
        {
            "run": run_id,
            "name": "'step_' || st.i",
            "kind": "'task'",
            "status": "'completed'",
            "started_at": ended,
            "finished_at": ended,
            **common,
        },
        f"{series} {times(steps, 'st')}",
    )
    print(f"  {runs * steps:,} steps written ({time.monotonic() - began:.0f}s)", flush=True)
    insert_select(
        Event,
        {"run": run_id, "type": "'step.completed'", "published": "TRUE", "created_at": ended},
        f"{series} {times(events, 'ev')}",
    )
    print(f"  {runs * events:,} events written ({time.monotonic() - began:.0f}s)", flush=True)
    analyse(database)
    return time.monotonic() - began


def analyse(database: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def event_table_size(database: str) -> str:
    from django.db import connection

    if database != "postgres":
        return "n/a"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_size_pretty(pg_table_size('workflows_event')), "
            "pg_size_pretty(pg_indexes_size('workflows_event')), "
            "(SELECT count(*) FROM workflows_event)"
        )
        table, indexes, rows = cursor.fetchone()
    return f"{rows:,} rows, table {table}, indexes {indexes}"


# -- the live load -------------------------------------------------------------------------


class Load:
    """Starts a run of the 10-step chain every 1/rate seconds in a thread, each under the
    business key of the phase it belongs to."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.phase = "warm-up"
        self.stop = threading.Event()
        self.started: dict[str, int] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from django.db import close_old_connections

        from workflows import start_run

        following = time.monotonic()
        for index in itertools.count():
            if self.stop.is_set():
                break
            phase = self.phase
            start_run(NOOP_WORKFLOW, {"n": index}, business_key=f"live-{phase}")
            self.started[phase] = self.started.get(phase, 0) + 1
            following += 1 / self.rate
            self.stop.wait(max(0.0, following - time.monotonic()))
        close_old_connections()


def step_latency(phase: str, settle: float = 60.0) -> Spread:
    """The gaps between consecutive step starts of the phase's runs, once they ended."""
    from workflows.models import Run, Step
    from workflows.status import RUN_FINAL

    key = f"live-{phase}"
    deadline = time.monotonic() + settle
    while Run.objects.filter(business_key=key).exclude(status__in=RUN_FINAL).exists():
        if time.monotonic() > deadline:
            raise BenchError(f"the runs of phase {phase!r} did not end within {settle:g}s")
        time.sleep(0.2)
    starts: dict[Any, list] = {}
    rows = Step.objects.filter(run__business_key=key).order_by("run_id", "name")
    for run_id, started in rows.values_list("run_id", "started_at"):
        starts.setdefault(run_id, []).append(started)
    gaps = [
        ms(later - earlier)
        for times in starts.values()
        for earlier, later in itertools.pairwise(times)
    ]
    return Spread.of(gaps)


# -- the benchmark -------------------------------------------------------------------------


@contextmanager
def database_url(database: str, tmp: Path) -> Any:
    if database == "postgres":
        with postgres_database(BENCH_DB) as url:
            yield url
    else:
        yield f"sqlite:///{tmp / 'retention.sqlite3'}"


def run_purge(env: dict[str, str], log: Path, batch_ms: float | None) -> dict[str, Any]:
    args = [sys.executable, str(MANAGE), "workflows_purge", "--older-than", PURGE_OLDER_THAN_DAYS]
    if batch_ms is not None:
        args += ["--batch-ms", f"{batch_ms:g}"]
    with log.open("wb") as errors:
        done = subprocess.run(
            [*args, "--json"],
            cwd=REPO_ROOT,
            env={**env, "PGAPPNAME": "bench-purge"},
            stdout=subprocess.PIPE,
            stderr=errors,
            timeout=PURGE_TIMEOUT,
            check=False,
        )
    if done.returncode != 0:
        raise BenchError(
            f"workflows_purge exited with {done.returncode}: {log.read_text()[-2000:]}"
        )
    return json.loads(done.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    figures: dict[str, Any] = {"database": args.database, "runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="bench-retention-") as tmp_name:
        tmp = Path(tmp_name)
        with database_url(args.database, tmp) as url:
            env = bench_env(url, tmp, workers=2)
            processes = Processes(tmp, env)
            try:
                figures.update(run(args, processes, env, tmp))
            except BenchError as exc:
                print(f"FAILED: {exc}", file=sys.stderr)
                return 1
            finally:
                processes.stop_all()
                from django.db import connections

                connections.close_all()
    report(figures)
    if args.json:
        print(json.dumps(figures, indent=2, default=str))
    return 0


def run(
    args: argparse.Namespace, processes: Processes, env: dict[str, str], tmp: Path
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    processes.manage("migrate", "migrate", "--no-input", timeout=600)
    setup_django(env)
    figures["facts"] = database_facts(args.database)
    print(f"building the history: {args.runs:,} runs ({figures['facts']['server']}) ...")
    figures["build_seconds"] = build_history(args.database, args.runs, args.steps, args.events)
    figures["events_before"] = event_table_size(args.database)
    print(f"  events: {figures['events_before']}")

    processes.start("worker", "workflows_worker")
    processes.start("sweeper", "workflows_sweeper")
    load = Load(args.rate)
    load.thread.start()
    time.sleep(10)  # the cluster starts, imports, connects; the warm-up runs go through
    processes.check_alive()

    load.phase = "without"
    figures["load_without"] = load_average()
    print(f"without purge: {args.seconds:g}s of live load (load {figures['load_without']}) ...")
    time.sleep(args.seconds)
    processes.check_alive()

    load.phase = "during"
    figures["load_during_start"] = load_average()
    print(f"during the purge of {args.runs:,} runs (load {figures['load_during_start']}) ...")
    purge = run_purge(env, tmp / "purge.log", args.batch_ms)
    figures["load_during_end"] = load_average()
    load.phase = "after"
    time.sleep(2)
    load.stop.set()
    load.thread.join(timeout=30)
    processes.check_alive()

    figures["purge"] = purge
    figures["live_runs"] = dict(load.started)
    without, during = step_latency("without"), step_latency("during")
    figures["latency_without"], figures["latency_during"] = without.__dict__, during.__dict__
    figures["p99_ratio"] = during.p99 / without.p99 if without.p99 else None
    figures["events_after"] = event_table_size(args.database)
    return figures


def report(figures: dict[str, Any]) -> None:
    purge = figures["purge"]
    without, during = figures["latency_without"], figures["latency_during"]
    facts = figures["facts"]
    print()
    print(f"retention on {facts['server']} ({facts['settings']}), python {facts['python']}")
    print(f"history: {figures['runs']:,} runs built in {figures['build_seconds']:.0f}s")
    print(f"  events before: {figures['events_before']}")
    print(f"  events after:  {figures['events_after']}")
    print(
        f"purge: {purge['runs']:,} runs and {purge['rows']:,} rows in {purge['seconds']:.1f}s "
        f"= {purge['runs_per_second']:,.0f} runs/s, {purge['batches']:,} batches"
    )
    print(
        f"  transaction time: p50 {purge['batch_ms_p50']:.1f} ms, p99 "
        f"{purge['batch_ms_p99']:.1f} ms, max {purge['batch_ms_max']:.1f} ms"
    )
    print(f"live runs started: {figures['live_runs']}")
    for label, spread, load in (
        ("without purge", without, figures["load_without"]),
        ("during purge ", during, f"{figures['load_during_start']}-{figures['load_during_end']}"),
    ):
        print(
            f"  step latency {label}: p50 {spread['p50']:.1f} ms, p99 {spread['p99']:.1f} ms, "
            f"max {spread['maximum']:.1f} ms over {spread['count']:,} gaps (load {load})"
        )
    ratio = figures["p99_ratio"]
    print(f"  p99 during / without: {ratio:.2f} (goal ≤ 2)" if ratio else "  p99 ratio: n/a")


if __name__ == "__main__":
    os.chdir(REPO_ROOT)
    sys.exit(main())
