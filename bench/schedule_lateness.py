"""Schedules' lateness: from a slot's instant to its run's start, with a real sweeper.

For each database (a fresh temporary SQLite file, and/or a database of its own on the
PostgreSQL server at 127.0.0.1:5432) a child process of this script migrates, creates
``--schedules`` schedules firing every second (overlap ``allow_all``, so every slot
starts a run) beside ``--idle`` schedules whose slots are a day away, and runs one
``workflows_sweeper`` process for ``--seconds``. Then, over every run the schedules
started, it prints the lateness (the run's ``created_at``, written in the transaction
that decided the slot, minus ``scheduled_for``): p50, p99 and the worst, in ms, and
checks that each slot started exactly one run and none was skipped or missed.

The issue's goal is p99 <= 1 s on both databases. Prints figures, asserts no timing;
exits non-zero if a slot started two runs or none.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workers import BenchError, postgres_database

REPO_ROOT = Path(__file__).resolve().parent.parent
DATABASE = "flowsite_bench_schedules"
WORKFLOW = "stock_update"  # a demo workflow of one step
INPUT = {"target": "warehouse"}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--databases", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--schedules", type=int, default=5, help="schedules every second")
    parser.add_argument("--idle", type=int, default=10_000, help="schedules not due")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the sweeper runs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def measure(args: argparse.Namespace) -> int:
    """In the child: set up, run the sweeper, print the figures of one database."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flowsite.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from workflows import create_schedule
    from workflows.definitions.schedules import ScheduleSpec
    from workflows.engine.sql.clock import database_now
    from workflows.models import Run, Schedule

    call_command("migrate", verbosity=0)
    later = database_now() + timedelta(days=1)
    idle = ScheduleSpec.checked(
        workflow=WORKFLOW, key="idle", every=timedelta(minutes=1), input=INPUT
    )
    Schedule.objects.bulk_create(
        [
            Schedule(
                key=f"idle-{n}",
                **Schedule.spec_columns(idle),
                next_slot_at=later,
                next_fire_at=later,
            )
            for n in range(args.idle)
        ],
        batch_size=1000,
    )
    keys = [f"bench-{n}" for n in range(args.schedules)]
    for key in keys:
        create_schedule(
            WORKFLOW, key=key, every=timedelta(seconds=1), overlap="allow_all", input=INPUT
        )
    connection.close()
    sweeper = subprocess.Popen(
        [sys.executable, "manage.py", "workflows_sweeper"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(args.seconds)
    sweeper.terminate()
    sweeper.wait(timeout=30)
    # Slots the sweeper decided in its first seconds, while it started up, are late by
    # its start-up time: count from the first slot after every schedule had fired once.
    runs = list(
        Run.objects.filter(schedule__key__in=keys).values_list(
            "schedule__key", "scheduled_for", "created_at"
        )
    )
    firsts = {}
    for key, slot, _ in sorted(runs, key=lambda row: row[1]):
        firsts.setdefault(key, slot)
    steady_from = max(firsts.values()) + timedelta(seconds=1)
    late = sorted(
        (created - slot) / timedelta(milliseconds=1)
        for _, slot, created in runs
        if slot >= steady_from
    )
    twice = [slot for slot, n in Counter((k, s) for k, s, _ in runs).items() if n > 1]
    schedules = Schedule.objects.filter(key__in=keys)
    skipped = sum(s.skipped_count + s.missed_count for s in schedules)
    print(
        f"  {connection.vendor}: {len(runs)} runs from {args.schedules} schedules every 1 s "
        f"beside {args.idle} idle ones; steady-state lateness over {len(late)} runs: "
        f"p50 {statistics.median(late):.0f} ms, p99 {late[int(len(late) * 0.99) - 1]:.0f} ms, "
        f"worst {late[-1]:.0f} ms; slots started twice: {len(twice)}, skipped or missed: {skipped}"
    )
    return 1 if twice or skipped else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return measure(args)
    print(f"Schedules' lateness ({args.seconds:.0f} s of a real workflows_sweeper per database)")
    failed = 0
    for database in args.databases:
        env = dict(os.environ)
        child = [sys.executable, __file__, "--child", database, *(argv or sys.argv[1:])]
        if database == "sqlite":
            with tempfile.TemporaryDirectory() as var:
                env.update(DATABASE_URL=f"sqlite:///{var}/bench.sqlite3", FLOWSITE_VAR_DIR=var)
                failed |= subprocess.run(child, env=env, cwd=REPO_ROOT, check=False).returncode
        else:
            try:
                with postgres_database(DATABASE) as url, tempfile.TemporaryDirectory() as var:
                    env.update(DATABASE_URL=url, FLOWSITE_VAR_DIR=var)
                    failed |= subprocess.run(child, env=env, cwd=REPO_ROOT, check=False).returncode
            except BenchError as exc:
                print(f"  postgresql: skipped ({exc})")
    return failed


if __name__ == "__main__":
    sys.exit(main())
