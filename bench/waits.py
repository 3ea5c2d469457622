"""``pending_waits`` over a large history: the first page, each filter, a deep page, the
API list and the console's Waits page.

In one process, on a fresh temporary SQLite file set up like the demo's, or on the
PostgreSQL database ``DATABASE_URL`` names (the script migrates it and leaves its rows
there: give it a scratch database). It bulk-inserts ``--runs`` finished runs with
``--steps`` completed steps each (the history a long-lived site keeps), then
``--waiting`` runs waiting at a gate, a signal, a callback or a sleep (a timer each),
``--held`` ready steps held by a concurrency limit, ``--queued`` queued runs and
``--blocked`` blocked flow members. Each read is timed ``--repeats`` times (median and
slowest, milliseconds) with its statement count, which must not grow with the tables
(``tests/queries/test_pending_waits.py`` pins it).

Why: "what is everything waiting for?" is asked when something is stuck, often when the
tables are largest; the goal is under 150 ms at 100,000 runs. The script prints figures
and asserts no timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import configure_django, print_table  # noqa: E402
from bench.pages import StatementCounter  # noqa: E402

BATCH = 5_000
WAITING_KINDS = ("gate", "signal", "task", "sleep")
TIMER_OF = {
    "gate": "gate_timeout",
    "signal": "signal_timeout",
    "task": "callback_timeout",
    "sleep": "sleep",
}


@contextmanager
def database() -> Iterator[str]:
    """Django on a fresh SQLite file, or on ``DATABASE_URL``'s database; yield which."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        with tempfile.TemporaryDirectory(prefix="flowsite-waits-") as tmp:
            configure_django(Path(tmp), None)
            import sqlite3

            yield f"SQLite {sqlite3.sqlite_version}, fresh file (WAL, synchronous=NORMAL)"
            from django.db import connections

            connections.close_all()
        return
    os.environ.update(
        DJANGO_SETTINGS_MODULE="flowsite.settings", FLOWSITE_EXECUTOR="inline", DJANGO_DEBUG="0"
    )
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.db import connection, connections

    try:
        yield f"PostgreSQL {connection.cursor().connection.info.server_version}, {url}"
    finally:
        connections.close_all()


def populate(args: argparse.Namespace) -> None:
    """The history, then the waits, in batches of bulk inserts."""
    from django.utils import timezone

    from workflows.models import Flow, FlowMember, Run, Step, Timer

    snapshot = {"name": "bulk", "version": 1, "steps": [{"name": "work", "kind": "task"}]}
    now = timezone.now()

    def runs(count: int, status: str, **fields: Any) -> Iterator[list[Run]]:
        for start in range(0, count, BATCH):
            batch = [
                Run(
                    id=uuid.uuid4(),
                    workflow_name=f"bulk_{n % 5}",
                    workflow_version=1,
                    snapshot=snapshot,
                    status=status,
                    business_key=f"BK-{status}-{n}",
                    **fields,
                )
                for n in range(start, min(start + BATCH, count))
            ]
            Run.objects.bulk_create(batch)
            yield batch

    for batch in runs(args.runs, "completed"):
        Step.objects.bulk_create(
            Step(run=run, name=f"work_{index}", kind="task", status="completed")
            for run in batch
            for index in range(args.steps)
        )
    for batch in runs(args.waiting, "waiting"):
        steps = Step.objects.bulk_create(
            Step(
                run=run,
                name="wait",
                kind=WAITING_KINDS[n % len(WAITING_KINDS)],
                status="waiting",
                prompt="Approve?",
                signal_name="go",
                attempt=1,
                started_at=now - timedelta(minutes=n % 10_000),
            )
            for n, run in enumerate(batch)
        )
        Timer.objects.bulk_create(
            Timer(run_id=step.run_id, step=step, kind=TIMER_OF[step.kind], due_at=now)
            for step in steps
        )
    for batch in runs(args.held, "running"):
        Step.objects.bulk_create(
            Step(
                run=run,
                name="call",
                kind="task",
                status="ready",
                held_on=f"concurrency:customer-{n % 50}",
            )
            for n, run in enumerate(batch)
        )
    for _ in runs(args.queued, "queued"):
        pass
    flow = Flow.objects.create(name="bench")
    for batch in runs(args.blocked, "blocked", flow=flow):
        FlowMember.objects.bulk_create(
            FlowMember(flow=flow, name=f"member-{run.pk}", run=run) for run in batch
        )


def timed(repeats: int, read: Callable[[], Any]) -> tuple[float, float, int]:
    """Median and slowest milliseconds of ``read``, and its statements (after a warm-up)."""
    from django.db import connection

    read()
    counter = StatementCounter()
    with connection.execute_wrapper(counter):
        read()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        read()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds) * 1000, max(seconds) * 1000, counter.statements


def measure(args: argparse.Namespace) -> list[tuple[str, str]]:
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    from workflows import pending_waits

    started = time.perf_counter()
    populate(args)
    rows = [
        ("history runs", f"{args.runs:,}"),
        ("insert s", f"{time.perf_counter() - started:.1f}"),
    ]
    deep = pending_waits(limit=500)
    for _ in range(3):
        deep = pending_waits(limit=500, cursor=deep.next_cursor)
    user = User.objects.create_superuser(f"bench-{uuid.uuid4().hex[:6]}", password="bench")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    reads: dict[str, Callable[[], Any]] = {
        "first page (100)": lambda: pending_waits(),
        "kind=gate": lambda: pending_waits(kind="gate"),
        "kind=concurrency,rate,budget": lambda: pending_waits(
            kind=["concurrency", "rate", "budget"]
        ),
        "kind=queued,blocked": lambda: pending_waits(kind=["queued", "blocked"]),
        "workflow=bulk_3": lambda: pending_waits(workflow="bulk_3"),
        "older_than=2h": lambda: pending_waits(older_than=timedelta(hours=2)),
        "page after 2,000": lambda: pending_waits(cursor=deep.next_cursor),
        "page of 500": lambda: pending_waits(limit=500),
        "GET /api/waits/": lambda: client.get("/api/waits/"),
        "admin Waits page": lambda: client.get(reverse("admin:workflows_waits")),
    }
    for name, read in reads.items():
        median, slowest, statements = timed(args.repeats, read)
        rows.append((f"{name}: median ms", f"{median:.1f}"))
        rows.append((f"{name}: slowest ms", f"{slowest:.1f}"))
        rows.append((f"{name}: statements", str(statements)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--waiting", type=int, default=4_000)
    parser.add_argument("--held", type=int, default=1_000)
    parser.add_argument("--queued", type=int, default=500)
    parser.add_argument("--blocked", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    with database() as where:
        rows = measure(args)
    print(f"pending_waits over {args.runs:,} finished runs ({args.steps} steps each), {where}")
    print(
        f"  waits: {args.waiting:,} waiting steps, {args.held:,} held steps, "
        f"{args.queued:,} queued runs, {args.blocked:,} blocked members"
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
