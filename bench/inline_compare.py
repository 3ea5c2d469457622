"""The inline step rate of several checkouts of the project, interleaved in one sitting.

Each checkout (this repository, or a worktree of an older commit: ``git worktree add
--detach /tmp/base <rev>`` with its ``.venv`` linked to this one's) runs its own
``bench/throughput.py`` functions on a fresh SQLite file of its own, migrated by its own
migrations, in a subprocess of its own: ``count_queries`` over 20 untimed runs, then
``--runs`` runs started and executed by ``run_pending``. Printed per checkout and round:

* **steps/s**: steps completed over the wall-clock seconds of the execution;
* **CPU ms per step**: the process's CPU time over the execution (user and system,
  ``getrusage``), the figure that moves least with the load of a shared machine;
* **queries per step**: SQL statements of the untimed runs' execution, per step;
* the 1-minute load average when the round ended.

Rounds rotate the order of the checkouts, so none always runs first. Medians are
printed at the end, and each checkout's medians over the first's.

    .venv/bin/python bench/inline_compare.py /tmp/base . --rounds 3

With ``--profile DIR`` each checkout then runs once more under cProfile, apart from the
rounds (``DIR/<n>-<name>.prof``, CPU-time clock), and prints its Python function calls
per step, a count that does not move with the machine's load.

The script prints figures and never asserts timings; it exits non-zero when a checkout
fails to run or does not complete every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# Run inside the checkout's own Python path: its bench.throughput, its engine.
CHILD = r"""
import json, os, resource, sys, time
repo, runs, profile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, repo)
os.chdir(repo)
from bench.fresh_sqlite import measured_in_fresh_sqlite

def measure():
    from bench import throughput
    queries = throughput.count_queries(20)
    throughput.start_runs(runs, "compared")
    profiler = None
    if profile:
        import cProfile
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
    before, began = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    throughput.execute_pending()
    seconds = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_SELF)
    calls = None
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
        import pstats
        calls = pstats.Stats(profile).total_calls
    completed_runs, steps = throughput.completed_counts("compared")
    if completed_runs != runs:
        raise SystemExit(f"{completed_runs} of {runs} runs completed")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "steps_per_second": steps / seconds,
        "cpu_ms_per_step": 1000 * cpu / steps,
        "queries_per_step": queries.execute_sql / queries.steps,
        "calls_per_step": calls / steps if calls else None,
    }

figures, _ = measured_in_fresh_sqlite(None, measure)
figures["load"] = os.getloadavg()[0]
print(json.dumps(figures))
"""

KEYS = ("steps_per_second", "cpu_ms_per_step", "queries_per_step")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("checkouts", nargs="+", type=Path, help="checkouts to compare")
    parser.add_argument("--runs", type=int, default=1000, help="timed runs (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--profile", type=Path, help="write each checkout's cProfile here")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.rounds < 1:
        parser.error("--runs and --rounds must be positive")
    return args


def one(checkout: Path, runs: int, profile: Path | None) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(checkout), str(runs), str(profile or "")],
        env={**os.environ, "DATABASE_URL": ""},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report_round(label: str, figures: dict[str, float]) -> None:
    calls = figures.get("calls_per_step")
    print(
        f"{label}: {figures['steps_per_second']:,.0f} steps/s, "
        f"{figures['cpu_ms_per_step']:.3f} CPU ms/step, "
        f"{figures['queries_per_step']:.2f} queries/step"
        + (f", {calls:.0f} Python calls/step" if calls else "")
        + f", load {figures['load']:.2f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    checkouts = [path.resolve() for path in args.checkouts]
    names = [f"{index}:{path.name}" for index, path in enumerate(checkouts)]
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for index in range(args.rounds):
        order = [(index + k) % len(checkouts) for k in range(len(checkouts))]
        for k in order:
            figures = one(checkouts[k], args.runs, None)
            rounds[names[k]].append(figures)
            report_round(f"round {index + 1} {names[k]}", figures)
    if args.profile:
        # Apart from the rounds: the profiler's own cost would change their figures.
        args.profile.mkdir(parents=True, exist_ok=True)
        for k, checkout in enumerate(checkouts):
            profile = args.profile / f"{k}-{checkout.name}.prof"
            report_round(f"profiled {names[k]}", one(checkout, args.runs, profile))
    medians = {
        name: {key: statistics.median(r[key] for r in runs) for key in KEYS}
        for name, runs in rounds.items()
    }
    first = medians[names[0]]
    print()
    print(f"medians of {args.rounds} rounds, {args.runs} runs x 10 steps (ratio to {names[0]}):")
    for name in names:
        m = medians[name]
        print(
            f"  {name}: {m['steps_per_second']:,.0f} steps/s "
            f"({m['steps_per_second'] / first['steps_per_second']:.2f}), "
            f"{m['cpu_ms_per_step']:.3f} CPU ms/step "
            f"({m['cpu_ms_per_step'] / first['cpu_ms_per_step']:.2f}), "
            f"{m['queries_per_step']:.2f} queries/step"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
