"""Does a step cost more once the history is big? The per-step cost, the sweeper and the
recovery scanners on an empty database, then on one holding a large history.

In one process, inline (``workflows.testing.run_pending``), on a fresh database (a
temporary SQLite file set up like the demo's, or a scratch PostgreSQL database):

1. **empty**: 10-step no-op runs executed inline (steps/s, statements per step), one
   sweeper poll with nothing due (``fire_due_timers``), firing 1,000 due sleep timers,
   and one pass of every recovery scanner (``recover``);
2. the database is filled with ``--finished-runs`` finished 10-step runs (their steps and
   events included: 100,000 runs hold 1,000,000 steps) and ``--future-timers`` sleeping
   runs whose timers are due in 30 days, cloned row for row from runs the engine made;
3. **filled**: the same measures again.

The recovery pass is what the sweeper runs every ``RECOVERY_INTERVAL``; the repair pass
(``repair_stuck_runs``, which checks every active run) runs every ``REPAIR_INTERVAL``.

The last column is filled ÷ empty. Indexes are what keeps it near 1: every query on the
per-step path and in the scanners reads through an index whose size does not grow with
finished history (partial indexes on ready, running and scheduled rows; the run's own
rows by run id). The script prints figures and asserts no timing; it exits non-zero
only if runs did not complete.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import configure_django  # noqa: E402
from bench.handlers import noop_chain  # noqa: E402
from workflows import Sleep, Task, Workflow  # noqa: E402

STEPS_PER_RUN = 10
DUE_TIMERS = 1_000
SCALE_DB = "flowsite_bench_scale"
BATCH = 5_000

ScaleNoop10 = noop_chain("bench_scale_noop_10", STEPS_PER_RUN, __name__)


class ScaleNap(Workflow):
    """A sleep of an hour, then a no-op: the timers the sweeper fires in the measure."""

    name = "bench_scale_nap"

    nap = Sleep(timedelta(hours=1))
    after = Task("bench.handlers.noop")


class ScaleLongSleep(Workflow):
    """A sleep of 30 days: the template of the future timers the database holds."""

    name = "bench_scale_long_sleep"

    nap = Sleep(timedelta(days=30))


@dataclass
class Measures:
    """One phase's figures (medians over ``rounds``)."""

    steps_per_second: float
    statements_per_step: float
    idle_poll_ms: float
    timers_fired_per_second: float
    recovery_pass_ms: float
    repair_pass_ms: float


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--finished-runs", type=int, default=100_000)
    parser.add_argument("--future-timers", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=200, help="10-step runs per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--polls", type=int, default=200, help="idle sweeper polls timed")
    return parser.parse_args(argv)


@contextmanager
def fresh_database(database: str) -> Iterator[str]:
    """Set Django up on a fresh database of the given kind; yield a description of it."""
    if database == "sqlite":
        with tempfile.TemporaryDirectory(prefix="flowsite-scale-") as tmp:
            configure_django(Path(tmp), None)
            yield f"SQLite file {Path(tmp) / 'flowsite.sqlite3'} (WAL, synchronous=NORMAL)"
        return
    from bench.workers import postgres_database

    with postgres_database(SCALE_DB) as url:
        os.environ.update(
            DJANGO_SETTINGS_MODULE="flowsite.settings",
            DATABASE_URL=url,
            FLOWSITE_EXECUTOR="inline",
            DJANGO_DEBUG="0",
        )
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        try:
            yield f"PostgreSQL database {SCALE_DB} (scratch, dropped afterwards)"
        finally:
            from django.db import connections

            connections.close_all()


# -- measures ------------------------------------------------------------------------------


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def steps_round(runs: int) -> float:
    """Steps/s of ``runs`` 10-step no-op runs started and run to completion inline."""
    import workflows
    from workflows.models import Run
    from workflows.testing import run_pending

    ids = [workflows.start_run(ScaleNoop10).pk for _ in range(runs)]
    seconds = timed(run_pending)
    completed = Run.objects.filter(pk__in=ids, status="completed").count()
    if completed != runs:
        raise SystemExit(f"only {completed} of {runs} runs completed")
    return runs * STEPS_PER_RUN / seconds


def statements_per_step(runs: int = 10) -> float:
    """Statements (without BEGIN/COMMIT/SAVEPOINT) per step of a few runs, run inline."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import workflows
    from workflows.testing import run_pending

    for _ in range(runs):
        workflows.start_run(ScaleNoop10)
    with CaptureQueriesContext(connection) as captured:
        run_pending()
    skipped = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")
    counted = [q for q in captured.captured_queries if not q["sql"].startswith(skipped)]
    return len(counted) / (runs * STEPS_PER_RUN)


def idle_poll_ms(polls: int) -> float:
    """Median milliseconds of one sweeper poll that finds nothing due."""
    from workflows.workers.scanners import fire_due_timers

    return statistics.median(timed(fire_due_timers) * 1000 for _ in range(polls))


def timers_round() -> float:
    """Timers fired per second: ``DUE_TIMERS`` sleeping runs whose hour has passed."""
    from django.utils import timezone

    import workflows
    from workflows.testing import run_pending
    from workflows.workers.scanners import fire_due_timers

    for _ in range(DUE_TIMERS):
        workflows.start_run(ScaleNap)
    later = timezone.now() + timedelta(hours=2)
    fired = 0
    started = time.perf_counter()
    while found := fire_due_timers(now=later).done:
        fired += found
    seconds = time.perf_counter() - started
    if fired != DUE_TIMERS:
        raise SystemExit(f"fired {fired} timers, expected {DUE_TIMERS}")
    # Finish the runs the timers released, so that the recovery pass measured next does
    # not find their steps ready and unclaimed, and redispatch them as real work.
    run_pending()
    return fired / seconds


def recovery_pass_ms() -> float:
    """One recovery pass as the sweeper makes it every ``RECOVERY_INTERVAL``."""
    from workflows.workers.scanners import recover
    from workflows.workers.sweeper import REPAIR

    return timed(lambda: recover(skip=(REPAIR,))) * 1000


def repair_pass_ms() -> float:
    """One ``repair_stuck_runs`` pass, made every ``REPAIR_INTERVAL``."""
    from workflows.workers.scanners import repair_stuck_runs

    return timed(repair_stuck_runs) * 1000


def measure(args: argparse.Namespace) -> Measures:
    steps = [steps_round(args.runs) for _ in range(args.rounds)]
    return Measures(
        steps_per_second=statistics.median(steps),
        statements_per_step=statements_per_step(),
        idle_poll_ms=idle_poll_ms(args.polls),
        timers_fired_per_second=statistics.median(timers_round() for _ in range(args.rounds)),
        recovery_pass_ms=statistics.median(recovery_pass_ms() for _ in range(args.rounds)),
        repair_pass_ms=statistics.median(repair_pass_ms() for _ in range(args.rounds)),
    )


# -- filling the history -------------------------------------------------------------------


def template_run(workflow: type[Workflow], *, finish: bool) -> Any:
    """A run the engine made (and ran to the end, with ``finish``), to clone rows from."""
    import workflows
    from workflows.models import Run
    from workflows.testing import run_pending

    run = workflows.start_run(workflow)
    if finish:
        run_pending()
    return Run.objects.get(pk=run.pk)


def clone_runs(template: Any, count: int, *, published: bool) -> None:
    """Insert ``count`` copies of ``template`` with its steps, timers and events.

    Copies keep every column of the engine's own rows (statuses, snapshots, payloads),
    with fresh keys, so the indexes hold what real history would make them hold.
    """
    from django.db import transaction

    from workflows.models import Event, Run, Step, Timer

    steps = list(Step.objects.filter(run=template))
    timers = list(Timer.objects.filter(run=template))
    events = list(Event.objects.filter(run=template))
    for start in range(0, count, BATCH):
        size = min(BATCH, count - start)
        with transaction.atomic():
            runs = [clone(template, id=uuid.uuid4(), idempotency_key=None) for _ in range(size)]
            Run.objects.bulk_create(runs)
            new_steps = [clone(step, id=None, run_id=run.pk) for run in runs for step in steps]
            Step.objects.bulk_create(new_steps)
            # (new run id, template step id) -> the cloned step's id
            step_of = {
                (run.pk, step.pk): new.pk
                for run, chunk in zip(runs, batched(new_steps, len(steps)), strict=True)
                for step, new in zip(steps, chunk, strict=True)
            }
            Timer.objects.bulk_create(
                clone(timer, id=None, run_id=run.pk, step_id=step_of.get((run.pk, timer.step_id)))
                for run in runs
                for timer in timers
            )
            Event.objects.bulk_create(
                clone(
                    event,
                    id=None,
                    run_id=run.pk,
                    step_id=step_of.get((run.pk, event.step_id)),
                    published=published,
                )
                for run in runs
                for event in events
            )


def clone(row: Any, **changes: Any) -> Any:
    """A new unsaved instance with ``row``'s column values and ``changes``."""
    values = {field.attname: getattr(row, field.attname) for field in row._meta.concrete_fields}
    values.update(changes)
    return type(row)(**values)


def batched(rows: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def fill(args: argparse.Namespace) -> dict[str, int]:
    """Fill the history; return the row counts it holds afterwards."""
    from django.db import connection

    from workflows.models import Event, Run, Step, Timer

    finished = template_run(ScaleNoop10, finish=True)
    clone_runs(finished, args.finished_runs - 1, published=True)
    sleeping = template_run(ScaleLongSleep, finish=False)
    clone_runs(sleeping, args.future_timers - 1, published=True)
    from workflows.workers.scanners import deliver_hooks

    deliver_hooks()  # the templates' own events, as a deployment's sweeper would
    if connection.vendor == "postgresql":
        # What autovacuum does by itself. SQLite gathers no statistics unless asked
        # (Django never runs ANALYZE there), so its planner is measured without them.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return {
        "runs": Run.objects.count(),
        "finished runs": Run.objects.filter(status="completed").count(),
        "steps": Step.objects.count(),
        "events": Event.objects.count(),
        "scheduled timers": Timer.objects.filter(status="scheduled").count(),
    }


# -- report --------------------------------------------------------------------------------


def report(empty: Measures, filled: Measures) -> None:
    rows = [
        ("10-step runs inline: steps/s", "steps_per_second", "{:,.0f}"),
        ("statements per step", "statements_per_step", "{:.2f}"),
        ("sweeper poll, nothing due: ms", "idle_poll_ms", "{:.3f}"),
        (f"timers fired/s ({DUE_TIMERS:,} due)", "timers_fired_per_second", "{:,.0f}"),
        ("recovery pass (every 5 s): ms", "recovery_pass_ms", "{:.1f}"),
        ("repair_stuck_runs pass (every minute): ms", "repair_pass_ms", "{:.1f}"),
    ]
    width = max(len(name) for name, _, _ in rows)
    print(f"\n  {'measure'.ljust(width)}  {'empty':>10}  {'filled':>10}  {'filled/empty':>12}")
    print(f"  {'-' * width}  {'-' * 10}  {'-' * 10}  {'-' * 12}")
    for name, attribute, number in rows:
        before, after = getattr(empty, attribute), getattr(filled, attribute)
        ratio = after / before if before else float("nan")
        print(
            f"  {name.ljust(width)}  {number.format(before):>10}  "
            f"{number.format(after):>10}  {ratio:>12.2f}"
        )
    print()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with fresh_database(args.database) as description:
        import platform

        import django

        print("Flowsite at scale: the same measures on an empty and on a filled database")
        print(f"  {description}")
        print(f"  Python {platform.python_version()}, Django {django.get_version()}, ", end="")
        print(f"{os.cpu_count()} CPUs; {args.runs} runs x {STEPS_PER_RUN} steps ", end="")
        print(f"per round, {args.rounds} rounds, medians")
        empty = measure(args)
        seconds = timed(lambda: print_counts(fill(args)))
        print(f"  filled in {seconds:.0f} s")
        filled = measure(args)
        report(empty, filled)
    return 0


def print_counts(counts: dict[str, int]) -> None:
    print("  history: " + ", ".join(f"{value:,} {name}" for name, value in counts.items()))


if __name__ == "__main__":
    sys.exit(main())
