"""External work in one process: what a claim, a heartbeat and a completion cost, and how
many jobs a worker gets through a second.

On a fresh temporary SQLite file set up like the demo's, or on the empty PostgreSQL
database ``--database-url`` names. A workflow of one external step (``Task(external=True,
queue="bench_outside")``) is started ``--runs`` times; then one worker claims
``--limit`` jobs at a time through the public verbs (``claim_external``) and completes
each (``complete_external``), as ``/api/work/`` does behind its views. Printed:

* **statements** of an empty claim (nothing ready), a claim of one job, a claim of
  ``--limit`` jobs (per job), a heartbeat, a log line, a completion and a failure:
  deterministic, for the record (the HTTP layer adds its authentication reads);
* **jobs/s**: claimed and completed, the runs' own ends included, over all the runs.

Why: an outside worker's claim and outcome each pay a signed-token check and a read of
the step beside the in-process outcome; this says how much. The script prints figures
and asserts no timing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import configure_django, print_table  # noqa: E402

QUEUE = "bench_outside"


def measure(args: argparse.Namespace) -> list[tuple[str, str]]:
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import workflows
    from workflows import Retry, Task, Workflow

    class Outside(Workflow):
        name = "bench_outside"
        charge = Task(
            external=True, queue=QUEUE, timeout=timedelta(minutes=5), retry=Retry(max_attempts=3)
        )

    def statements(call) -> tuple[int, object]:
        with CaptureQueriesContext(connection) as captured:
            result = call()
        return len(captured.captured_queries), result

    def claim(limit: int) -> list[workflows.ExternalJob]:
        return workflows.claim_external([QUEUE], worker="bench", limit=limit)

    figures: list[tuple[str, str]] = []
    empty, _ = statements(lambda: claim(1))
    figures.append(("statements: empty claim", str(empty)))
    for _ in range(3):
        workflows.start_run(Outside, {})
    one, (job,) = statements(lambda: claim(1))
    figures.append(("statements: claim of 1 job", str(one)))
    for label, call in (
        ("heartbeat", lambda: workflows.heartbeat_external(job.lease)),
        ("heartbeat with progress", lambda: workflows.heartbeat_external(job.lease, progress=1)),
        ("log line", lambda: workflows.log_external(job.lease, "a line")),
        ("completion", lambda: workflows.complete_external(job.lease, {"ok": True})),
    ):
        figures.append((f"statements: {label}", str(statements(call)[0])))
    (failing,) = claim(1)
    figures.append(
        (
            "statements: failure",
            str(statements(lambda: workflows.fail_external(failing.lease, "x"))[0]),
        )
    )
    for _ in range(args.limit):
        workflows.start_run(Outside, {})
    many, jobs = statements(lambda: claim(args.limit))
    figures.append((f"statements: claim of {len(jobs)} jobs, per job", f"{many / len(jobs):.1f}"))
    for each in jobs:
        workflows.complete_external(each.lease, {"ok": True})
    workflows.complete_external(claim(1)[0].lease, {"ok": True})  # the one left

    for _ in range(args.runs):
        workflows.start_run(Outside, {})
    started = time.perf_counter()
    done = 0
    while jobs := claim(args.limit):
        for each in jobs:
            workflows.complete_external(each.lease, {"ok": True})
        done += len(jobs)
    elapsed = time.perf_counter() - started
    from workflows.models import Run

    completed = Run.objects.filter(workflow_name=Outside.name, status="completed").count()
    if done != args.runs or completed != args.runs + args.limit + 2:
        raise SystemExit(f"{done} jobs done of {args.runs}; {completed} runs completed")
    figures.append((f"jobs/s (claims of {args.limit}, one worker)", f"{done / elapsed:,.0f}"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs to work through (1000)")
    parser.add_argument("--limit", type=int, default=10, help="jobs a claim takes (10)")
    parser.add_argument("--database-url", default="", help="an empty PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flowsite-external-") as tmp:
        configure_django(Path(tmp), None, args.database_url)
        from django.db import connection

        figures = measure(args)
        print(f"External work on {connection.vendor}")
        print_table(figures)


if __name__ == "__main__":
    main()
