"""Server-side times of every operator console page and every API list over 100,000 runs,
on SQLite and on PostgreSQL.

What it measures, in one process per database (``--database both`` runs this script
once for each): a fresh temporary SQLite file configured like the demo project
(``bench/fresh_sqlite.py``), or a PostgreSQL database of its own, created and dropped
as ``bench/workers.py`` does. Into it, with ``bulk_create``, N runs (default 100,000)
shaped like a production history: spread over 30 days, five workflows and every run
status, two steps each (a failed run's step failed, a waiting run's second step an
approval gate, a sleep with its timer or a signal), an event per step, deadlines on
one run in 50, flows of three member runs on one run in 100, budgets, event consumers
and worker presences; plus one real ``warehouse_dispatch`` run advanced inline to its
approval gate. On PostgreSQL a ``VACUUM ANALYZE`` follows, as autovacuum would
within a minute of such inserts (without statistics the planner takes the fresh
tables for empty). Then, signed in as a superuser through Django's test client (the API
with the superuser's token), each page is requested R times (default 5):

* console: the runs list (plain, each attention filter, each deadline filter, a
  search by business-key prefix, by status and workflow, sorted by another column),
  the dashboard, the approvals inbox and a gate's decision page, the waits page,
  the consumers page, the flows list and a flow's page, the run page, the budgets,
  workers, steps and timers lists;
* API: the runs list (plain and with each filter), a run, its events, a step, the
  gates inbox, the waits, the flows list and a flow, the budgets, the workflow
  definitions and an event consumer's page.

It prints, per page, the median and the slowest request (the whole request through the
middleware, as the server spends it; no network, no browser), its query count, which
must not grow with N (``tests/admin/test_admin_scale.py`` pins it), and the goal
(150 ms a console page, 50 ms an API list) with "met" or "NOT met". A page the code
under test lacks (an older commit) prints "absent" instead of failing the run.

Why: the console is where an operator looks first when something is wrong, often when
the tables are largest; a page that takes seconds at 100,000 runs is a page nobody
opens. The script prints figures and never asserts timings.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import (  # noqa: E402
    configure_django,
    measured_in_fresh_sqlite,
    print_header,
    print_table,
)
from bench.pages import print_pages, render_times  # noqa: E402

BATCH = 5_000
POSTGRES_DB = "flowsite_bench_admin"
HISTORY_DAYS = 30
# Twenty runs' statuses, repeated: mostly finished, as a production history is. The
# newest batch was created within the last day and a half: the dashboard's chart of the
# last 24 hours has runs in it.
STATUSES = (
    *["completed"] * 12,
    "failed",
    "compensated",
    "cancelled",
    "waiting",
    "waiting",
    "waiting",
    "running",
    "pending",
)
WORKFLOWS = 5
LIVE = ("waiting", "running", "pending")


def populate(runs: int) -> dict[str, str]:
    """The history described in the module docstring; return the ids the pages need."""
    add_history(range(runs))
    return add_fixtures()


def add_history(numbers: range) -> None:
    """Runs ``numbers`` (``BK-<n>``) in batches dated across :data:`HISTORY_DAYS`, the
    oldest first, and a flow for every hundred of them (its first three runs)."""
    from django.utils import timezone

    from workflows.models import Flow

    now = timezone.now()
    flows = {
        n // 100: Flow(id=uuid.uuid4(), name=f"flow-{n // 100}", key=f"F-{n // 100}")
        for n in numbers
        if n % 100 == 0
    }
    Flow.objects.bulk_create(flows.values())
    starts = range(numbers.start, numbers.stop, BATCH)
    for number, start in enumerate(starts):
        # Each batch a little older than the next: the history spans HISTORY_DAYS.
        created = now - timedelta(days=HISTORY_DAYS) * (len(starts) - number) / len(starts)
        insert_batch(range(start, min(start + BATCH, numbers.stop)), created, now, flows)


def add_fixtures() -> dict[str, str]:
    """Budgets, a consumer, workers, the superuser and its token, and one real run
    waiting at its approval gate; return the ids the pages need."""
    from django.contrib.auth.models import User
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    import workflows
    from workflows.models import BudgetCounter, EventConsumer, Flow, WorkerPresence
    from workflows.testing import run_pending

    now = timezone.now()
    BudgetCounter.objects.bulk_create(
        BudgetCounter(workflow_name=f"bulk_{n}", dimension="cost", limit=1000, used=n * 100)
        for n in range(WORKFLOWS)
    )
    EventConsumer.objects.create(name="bench")
    WorkerPresence.objects.bulk_create(
        WorkerPresence(name=f"worker-{n}", started_at=now, seen_at=now) for n in range(4)
    )
    user = User.objects.create_superuser("bench", password="bench")
    real = workflows.start_run(
        "warehouse_dispatch",
        {"order_id": "B-1", "parcels": [{"id": f"P{n}", "weight_kg": 1} for n in range(4)]},
        business_key="B-1",
    )
    run_pending()
    gate = real.steps.get(kind="gate", status="waiting")
    flow = Flow.objects.order_by("key").values_list("pk", flat=True).first()
    return {
        "run": str(real.pk),
        "gate": str(gate.pk),
        "flow": str(flow or uuid.uuid4()),
        "token": Token.objects.create(user=user).key,
    }


def insert_batch(numbers: range, created: datetime, now: datetime, flows: dict[int, Any]) -> None:
    """Runs ``numbers`` with their steps, timers, events and flow memberships."""
    from workflows.models import Event, FlowMember, Run, Step, Timer

    snapshot = {"name": "bulk", "version": 1, "steps": [{"name": "work", "kind": "task"}]}
    runs = [
        Run(
            id=uuid.uuid4(),
            workflow_name=f"bulk_{n % WORKFLOWS}",
            workflow_version=1,
            snapshot=snapshot,
            status=STATUSES[n % len(STATUSES)],
            business_key=f"BK-{n}",
            deadline=now + timedelta(hours=n % 7 - 2) if n % 50 == 0 else None,
            flow=flows.get(n // 100) if n % 100 < 3 else None,
            started_at=created,
            finished_at=None if STATUSES[n % len(STATUSES)] in LIVE else created,
        )
        for n in numbers
    ]
    Run.objects.bulk_create(runs)
    # auto_now_add stamps every row with now; one UPDATE dates the batch.
    Run.objects.filter(pk__in=[run.pk for run in runs]).update(created_at=created)
    steps: list[Step] = []
    members: list[FlowMember] = []
    for n, run in zip(numbers, runs, strict=True):
        for step in first_and_second_step(n, run):
            # A step that began has a start (the waits page ages a wait from it).
            step.started_at = None if step.status == "pending" else created
            steps.append(step)
        if run.flow_id is not None:
            members.append(FlowMember(flow_id=run.flow_id, name=f"m{n % 100}", run=run))
    Step.objects.bulk_create(steps)
    due = now + timedelta(hours=1)
    timers = [
        Timer(run=step.run, step=step, kind="sleep", due_at=due)
        for step in steps
        if step.kind == "sleep" and step.status == "waiting"
    ]
    Timer.objects.bulk_create(timers)
    FlowMember.objects.bulk_create(members)
    Event.objects.bulk_create(
        Event(run=step.run, step=step, type=f"step.{step.status}", payload={}) for step in steps
    )


def first_and_second_step(n: int, run: Any) -> tuple[Any, Any]:
    """A run's two steps, in the states its status implies."""
    from workflows.models import Step

    status = run.status
    first = Step(run=run, name="work", kind="task", status="completed")
    if status == "failed":
        first.status = "failed"
        first.failure_class = "permanent"
        return first, Step(run=run, name="ship", kind="task", status="pending")
    if status == "waiting":
        kind = ("gate", "sleep", "signal")[n % 3]
        second = Step(run=run, name=f"wait_{kind}", kind=kind, status="waiting")
        if kind == "gate":
            second.permission = "workflows.view_run"
        if kind == "signal":
            second.signal_name = "approved"
        return first, second
    if status in ("running", "pending"):
        return first, Step(run=run, name="ship", kind="task", status="pending")
    done = "compensated" if status == "compensated" else "completed"
    return first, Step(run=run, name="ship", kind="task", status=done)


def in_postgres(measure: Callable[[], Any]) -> tuple[Any, str]:
    """``measure`` against a PostgreSQL database of this benchmark's own, dropped afterwards."""
    from bench.workers import postgres_database

    with (
        tempfile.TemporaryDirectory(prefix="flowsite-bench-") as tmp,
        postgres_database(POSTGRES_DB) as url,
    ):
        configure_django(Path(tmp), None, database_url=url)
        from django.db import connection, connections

        try:
            version = connection.cursor().connection.info.server_version
            return measure(), f"PostgreSQL {version}, fresh database {POSTGRES_DB}"
        finally:
            connections.close_all()


def measure_one(args: argparse.Namespace) -> None:
    def measure() -> tuple[list[tuple[str, str]], list[Any]]:
        started = time.perf_counter()
        ids = populate(args.runs)
        took = time.perf_counter() - started
        if args.database == "postgres":
            # What autovacuum does within a minute of such inserts: statistics for the
            # planner and the visibility map for index-only scans.
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")
        inserted = [("runs inserted", f"{args.runs:,}"), ("insert s", f"{took:.1f}")]
        return inserted, render_times(args.repeats, ids)

    title = f"Operator console pages and API lists over {args.runs:,} runs"
    if args.database == "postgres":
        (inserted, rows), where = in_postgres(measure)
        print(title)
        print(f"  {where}")
    else:
        (inserted, rows), facts = measured_in_fresh_sqlite(None, measure)
        print_header(title, facts)
    print_table(inserted)
    print_pages(rows)


def each_database(argv: list[str]) -> Iterator[int]:
    """Run this script once per database: Django is set up once per process."""
    for database in ("sqlite", "postgres"):
        command = [sys.executable, __file__, *argv, "--database", database]
        yield subprocess.run(command, check=False, env=os.environ).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Console goal: 150 ms a page; API goal: 50 ms a list (medians).",
    )
    parser.add_argument("--runs", type=int, default=100_000, help="runs to insert (100,000)")
    parser.add_argument("--repeats", type=int, default=5, help="requests per page (5)")
    parser.add_argument(
        "--database",
        choices=("sqlite", "postgres", "both"),
        default="both",
        help="a fresh SQLite file, a fresh PostgreSQL database on 127.0.0.1 "
        f"({POSTGRES_DB}, created and dropped), or one after the other (default)",
    )
    args = parser.parse_args(argv)
    if args.database == "both":
        # The last --database given wins: each run appends its own.
        return max(each_database(sys.argv[1:] if argv is None else argv))
    measure_one(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
