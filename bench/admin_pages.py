"""Server-side render times of the operator console's pages over 100,000 runs, on SQLite.

What it measures, in one process on a fresh temporary SQLite file configured like the
demo project (``bench/fresh_sqlite.py``): N runs (default 100,000) inserted with
``bulk_create`` in a spread of statuses and three workflows, one step each, plus one
real ``warehouse_dispatch`` run advanced inline to its approval gate; then, signed in
as a superuser through Django's test client, each page rendered R times (default 5):

* the runs list (first page, then filtered by attention ``failed``, then searched by
  a business-key prefix),
* the dashboard,
* the approvals inbox,
* the run page of the real run.

It prints the median and slowest render of each page (the whole request through the
middleware, as the server spends it; no network, no browser) and its query count,
which must not grow with N (``tests/admin/test_admin_scale.py`` asserts that).

Why: the console is where an operator looks first when something is wrong, often when
the tables are largest; a page that takes seconds at 100,000 runs is a page nobody
opens. The script prints figures and never asserts timings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import measured_in_fresh_sqlite, print_header, print_table  # noqa: E402

BATCH = 5_000
STATUSES = ("completed", "waiting", "failed", "compensated", "running")


def populate(runs: int) -> str:
    """Insert ``runs`` runs with a step each, and one real run waiting at its gate."""
    from django.contrib.auth.models import User

    import workflows
    from workflows.models import Run, Step
    from workflows.testing import run_pending

    snapshot = {"name": "bulk", "version": 1, "steps": [{"name": "work", "kind": "task"}]}
    for start in range(0, runs, BATCH):
        rows = [
            Run(
                id=uuid.uuid4(),
                workflow_name=f"bulk_{n % 3}",
                workflow_version=1,
                snapshot=snapshot,
                status=STATUSES[n % len(STATUSES)],
                business_key=f"BK-{n}",
            )
            for n in range(start, min(start + BATCH, runs))
        ]
        Run.objects.bulk_create(rows)
        Step.objects.bulk_create(
            Step(run=row, name="work", kind="task", status="completed") for row in rows
        )
    User.objects.create_superuser("bench", password="bench")
    real = workflows.start_run(
        "warehouse_dispatch",
        {"order_id": "B-1", "parcels": [{"id": f"P{n}", "weight_kg": 1} for n in range(4)]},
        business_key="B-1",
    )
    run_pending()
    return str(real.pk)


class StatementCounter:
    """An ``execute_wrapper`` that counts statements, whatever ``DEBUG`` says."""

    def __init__(self) -> None:
        self.statements = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements += 1
        return execute(sql, params, many, context)


def render_times(repeats: int, real_run: str) -> list[tuple[str, str]]:
    """Render each page ``repeats`` times; return the table's rows."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    client = Client(HTTP_HOST="localhost")
    client.force_login(User.objects.get(username="bench"))
    runs = reverse("admin:workflows_run_changelist")
    pages = {
        "runs list": runs,
        "runs list, attention=failed": f"{runs}?attention=failed",
        "runs list, search BK-4": f"{runs}?q=BK-4",
        "dashboard": reverse("admin:workflows_dashboard"),
        "approvals inbox": reverse("admin:workflows_approvals"),
        "run page": reverse("admin:workflows_run_change", args=[real_run]),
    }
    rows = []
    for name, url in pages.items():
        client.get(url)  # warm: sessions, permissions, template loading
        counter = StatementCounter()
        with connection.execute_wrapper(counter):
            response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{name}: HTTP {response.status_code}")
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            client.get(url)
            seconds.append(time.perf_counter() - started)
        rows.append((f"{name}: median ms", f"{statistics.median(seconds) * 1000:.1f}"))
        rows.append((f"{name}: slowest ms", f"{max(seconds) * 1000:.1f}"))
        rows.append((f"{name}: queries", str(counter.statements)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    def measure() -> list[tuple[str, str]]:
        started = time.perf_counter()
        real = populate(args.runs)
        took = time.perf_counter() - started
        inserted = [("runs inserted", f"{args.runs:,}"), ("insert s", f"{took:.1f}")]
        return [*inserted, *render_times(args.repeats, real)]

    rows: Any
    rows, facts = measured_in_fresh_sqlite(None, measure)
    print_header(f"Operator console pages over {args.runs:,} runs", facts)
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
