"""The cost of live telemetry: a step calling ``ctx.progress`` 10,000 times, and one
logging 1,000 lines, beside a plain step.

In one process, on a fresh temporary SQLite file set up like the demo's, or on the
PostgreSQL database ``DATABASE_URL`` names (migrated; its rows are left there: give it a
scratch database). Each round starts one run of each workflow below (one task step
each) and times its step from claim to recorded outcome, as a worker runs it
(``execute_step``, no chaining): the claim, the handler, the attempt's last telemetry
flush and the completion. Printed: the median and the best of ``--rounds`` rounds
(after a warm-up) in milliseconds, each step's ratio to the plain step (medians), and
what one ``ctx.progress`` call and one logged line cost on their own.

* ``plain``: a handler that returns at once.
* ``empty loop``: ``for i in range(10_000): pass``, the loop alone, for reference.
* ``progress loop``: ``ctx.progress(i, 10_000)`` on every turn (goal: under 1.5 times a
  plain step); coalesced, it writes once per ``PROGRESS_INTERVAL`` and at the end.
* ``1,000 log lines``: ``ctx.log(f"line {i}")`` on every turn, written in batches.

Why: the issue asks that reporting progress from a tight loop cost almost nothing, so
that handler authors call it freely. The script prints figures and asserts no timing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import print_table  # noqa: E402
from bench.waits import database  # noqa: E402

LOOP = 10_000
LINES = 1_000


def plain(ctx: Any) -> None:
    return None


def empty_loop(ctx: Any) -> None:
    for _ in range(LOOP):
        pass


def progress_loop(ctx: Any) -> None:
    for done in range(LOOP):
        ctx.progress(done, LOOP)


def log_lines(ctx: Any) -> None:
    for line in range(LINES):
        ctx.log(f"line {line}")


HANDLERS = {
    "plain": plain,
    "empty loop": empty_loop,
    "progress loop": progress_loop,
    "1,000 log lines": log_lines,
}


def workflows_of_handlers() -> dict[str, Any]:
    """One single-step workflow per handler, declared once Django is set up."""
    from workflows import Task, Workflow

    declared = {}
    for label, handler in HANDLERS.items():
        name = f"bench_telemetry_{handler.__name__}"
        step = Task(f"{__name__}.{handler.__name__}")
        declared[label] = type(
            name, (Workflow,), {"__module__": __name__, "name": name, "work": step}
        )
    return declared


def step_time(workflow: Any) -> float:
    """Seconds from claim to recorded outcome of the run's one step."""
    import workflows
    from workflows.models import Step
    from workflows.workers.runner import execute_step

    run = workflows.start_run(workflow)
    step_id = Step.objects.get(run=run, name="work").pk
    started = time.perf_counter()
    assert execute_step(step_id, chain=False) == 1
    elapsed = time.perf_counter() - started
    assert Step.objects.get(pk=step_id).status == "completed"
    return elapsed


def measure(rounds: int) -> list[tuple[str, str]]:
    declared = workflows_of_handlers()
    for workflow in declared.values():  # warm-up: imports, statement caches
        step_time(workflow)
    times: dict[str, list[float]] = {label: [] for label in declared}
    for _ in range(rounds):
        for label, workflow in declared.items():
            times[label].append(step_time(workflow))
    medians = {label: statistics.median(measured) for label, measured in times.items()}
    rows = []
    for label, median in medians.items():
        best = min(times[label])
        rows.append((f"{label} (ms, median / best)", f"{median * 1000:.2f} / {best * 1000:.2f}"))
        rows.append((f"{label} / plain (medians)", f"{median / medians['plain']:.2f}x"))
    per_call = (medians["progress loop"] - medians["empty loop"]) / LOOP
    per_line = (medians["1,000 log lines"] - medians["plain"]) / LINES
    rows.append(("ctx.progress, per call (ns)", f"{per_call * 1e9:.0f}"))
    rows.append(("ctx.log, per line written (us)", f"{per_line * 1e6:.1f}"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds (median)")
    args = parser.parse_args(argv)
    with database() as where:
        import django

        print("Live telemetry: a step's cost with ctx.progress and ctx.log")
        print(f"  {where}; Python {sys.version.split()[0]}, Django {django.get_version()}")
        print(f"  median of {args.rounds} rounds, one step per run, claim to outcome")
        print_table(measure(args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
