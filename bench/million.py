"""A million runs: building the history by bulk SQL, every console page and API list at
1,000,000 runs against the same at 10,000, and the per-step cost against 10,000,000
events. One command per figure:

* ``build NAME --runs N [--live L]`` (re)creates the database NAME (PostgreSQL on
  127.0.0.1, or an SQLite file under ``--var-dir``), migrates it and fills it with
  ``bench/history_sql.py`` (N runs, ten events each; by default the newest twentieth of
  them holds the live runs, so that the live work grows with the history; with
  ``--live L``, L runs in live states whatever N: the same live work at every size),
  plus the fixtures the pages need (a superuser and its token, budgets, a consumer,
  workers, a real run waiting at its approval gate), then ``VACUUM ANALYZE``. Prints
  the time each part took.
* ``pages`` times every console page and API list (``bench/pages.py``: the pages
  ``bench/admin_pages.py`` times, the tag filters too) and ``workflows.explain`` of a run
  over ``--small`` (10,000 runs) and ``--large`` (1,000,000 runs), interleaved page by
  page in one process: per page the median and slowest request at each size, the goal
  (150 ms a console page, 50 ms an API list, 20 ms explain, 150 ms the approvals inbox)
  met or NOT met at 1,000,000 runs, and the ratio 1,000,000 ÷ 10,000 (goal ≤ 1.5, a
  figure the machine's speed of the hour does not move). ``--build`` builds both first.
* ``flat`` (PostgreSQL) the inline step rate of 10-step no-op runs on an empty database
  and on ``--filled`` (10,000,000 events), round after round alternately, and the
  statements per step of each: the goal is filled ÷ empty ≥ 0.9, statements equal.

The machine's load (``uptime``) is printed with every figure. The script prints figures
and asserts no timing. Examples::

    python bench/million.py build million_bench_1m --runs 1000000
    python bench/million.py pages --build
    python bench/million.py build million_live_1m --runs 1000000 --live 125
    python bench/million.py pages --large million_live_1m    # the same live work
    python bench/million.py pages --database sqlite --build
    python bench/million.py flat
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.pages import clients, every_page, timed, timed_call  # noqa: E402

EXPLAIN_GOAL_MS = 20.0
INBOX_GOAL_MS = 150.0
RATIO_GOAL = 1.5
FLAT_GOAL = 0.9
PREFIX = "million_"  # the only databases this script creates or drops
DEFAULT_VAR_DIR = Path(os.environ.get("FLOWSITE_VAR_DIR", "/tmp/flowsite-million"))


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


# -- databases ----------------------------------------------------------------------------


def database_url(name: str) -> str:
    from bench.workers import POSTGRES

    return f"postgres://{POSTGRES['user']}@{POSTGRES['host']}:{POSTGRES['port']}/{name}"


def setup_django(database: str, name: str, var_dir: Path) -> None:
    """Set Django up on the demo project's settings, pointed at ``name``."""
    os.environ.update(
        DJANGO_SETTINGS_MODULE="flowsite.settings", FLOWSITE_EXECUTOR="inline", DJANGO_DEBUG="0"
    )
    os.environ["FLOWSITE_VAR_DIR"] = str(var_dir / name)
    if database == "postgres":
        os.environ["DATABASE_URL"] = database_url(name)
    else:
        os.environ.pop("DATABASE_URL", None)
        (var_dir / name).mkdir(parents=True, exist_ok=True)
    import django

    django.setup()


def switch_to(database: str, name: str, var_dir: Path) -> None:
    """Point the default connection at ``name`` (the next query reconnects)."""
    from django.db import connection

    connection.close()
    if database == "postgres":
        connection.settings_dict["NAME"] = name
    else:
        (var_dir / name).mkdir(parents=True, exist_ok=True)
        connection.settings_dict["NAME"] = str(var_dir / name / "flowsite.sqlite3")


def recreate(database: str, name: str, var_dir: Path) -> None:
    """Drop and create ``name`` (a ``million_`` database), empty."""
    if not name.startswith(PREFIX):
        raise SystemExit(f"{name}: this script only makes databases named {PREFIX}...")
    from django.db import connection

    connection.close()
    if database == "sqlite":
        for path in (var_dir / name).glob("flowsite.sqlite3*"):
            path.unlink()
        return
    import psycopg
    from psycopg import sql

    from bench.workers import POSTGRES, POSTGRES_MAINTENANCE_DB

    with psycopg.connect(**POSTGRES, dbname=POSTGRES_MAINTENANCE_DB, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def build(database: str, name: str, runs: int, var_dir: Path, live: int | None = None) -> None:
    """(Re)create ``name``, migrate, fill ``runs`` runs (``live`` of them in live states,
    or as many as the history's size makes), add the fixtures, analyze."""
    from django.core.management import call_command

    from bench.admin_pages import add_fixtures
    from bench.history_sql import analyze, fill

    recreate(database, name, var_dir)
    switch_to(database, name, var_dir)
    call_command("migrate", verbosity=0)
    live_set = "live runs in proportion" if live is None else f"{live:,} live runs"
    print(f"build {name}: {runs:,} runs, {live_set} ({database}); {uptime()}", flush=True)
    started = time.perf_counter()

    def progress(done: int, seconds: float) -> None:
        print(f"  {done:>9,} runs  {seconds:6.0f} s", flush=True)

    counts = fill(runs, live=live, progress=progress)
    filled = time.perf_counter() - started
    add_fixtures()
    fixtures = time.perf_counter() - started - filled
    analyze()
    analyzed = time.perf_counter() - started - filled - fixtures
    from bench.history_sql import table_counts

    counts = table_counts()
    print(f"  fill {filled:.0f} s, fixtures {fixtures:.0f} s, analyze {analyzed:.0f} s")
    print("  rows: " + ", ".join(f"{value:,} {table}" for table, value in counts.items()))


def fixture_ids() -> dict[str, str]:
    """The ids ``bench/pages.py`` needs, read back from a built database."""
    from rest_framework.authtoken.models import Token

    from workflows.models import Flow, Run

    run = Run.objects.filter(workflow_name="warehouse_dispatch").order_by("created_at").first()
    if run is None:
        raise SystemExit("the database was not built by this script: run `build` first")
    gate = run.steps.filter(kind="gate").first()
    flow = Flow.objects.order_by("-created_at").values_list("pk", flat=True).first()
    return {
        "run": str(run.pk),
        "gate": str(gate.pk),
        "flow": str(flow),
        "token": Token.objects.get(user__username="bench").key,
    }


# -- pages --------------------------------------------------------------------------------


def goal_of(name: str, goal: float) -> float:
    return INBOX_GOAL_MS if name == "approvals inbox" else goal


def timed_explain(repeats: int, run: str) -> tuple[list[float], int]:
    """``workflows.explain`` of the run ``repeats`` times, and its statement count."""
    import workflows

    workflows.explain(run)  # warm: the workflow's definition, content types
    return timed_call(lambda: workflows.explain(run), repeats)


def measure_pages(args: argparse.Namespace) -> None:
    sizes = (args.small, args.large)
    setup_django(args.database, args.large, args.var_dir)
    if args.build:
        for name, runs in zip(sizes, (args.small_runs, args.large_runs), strict=True):
            build(args.database, name, runs, args.var_dir, args.live)
    per_db: dict[str, tuple[dict[str, str], Any, Any]] = {}
    for name in sizes:
        switch_to(args.database, name, args.var_dir)
        ids = fixture_ids()
        per_db[name] = (ids, *clients(ids))
    pages = every_page(per_db[args.large][0])
    print(f"\nEvery console page and API list: {args.small} against {args.large}")
    print(f"  {args.database}; {args.repeats} requests a page, interleaved; medians in ms")
    print(f"  load before: {uptime()}")
    rows = []
    names = [*(name for name, _, _, _ in pages), "explain (a run at its gate)"]
    for index, page in enumerate(names):
        figures = []
        for name in sizes:
            switch_to(args.database, name, args.var_dir)
            ids, console, api = per_db[name]
            if index < len(pages):
                _, _, is_api, goal = pages[index]
                # Each database's own ids: the url of this page on this database.
                url = dict((n, u) for n, u, _, _ in every_page(ids))[page]
                figures.append(timed(api if is_api else console, url, args.repeats))
            else:
                goal = EXPLAIN_GOAL_MS
                figures.append(timed_explain(args.repeats, ids["run"]))
        rows.append(row(page, goal_of(page, goal), figures))
    print_rows(rows)
    print(f"  load after: {uptime()}")


def row(page: str, goal: float, figures: list[tuple[list[float], int] | None]) -> tuple[str, ...]:
    if any(figure is None for figure in figures):
        return (page, "absent", "", "", "", "", "", "", "")
    (small, small_queries), (large, large_queries) = figures  # type: ignore[misc]
    small_ms, large_ms = (statistics.median(seconds) * 1000 for seconds in (small, large))
    ratio = large_ms / small_ms
    met = "met" if large_ms <= goal else "NOT met"
    ratio_met = "met" if ratio <= RATIO_GOAL else "NOT met"
    return (
        page,
        f"{small_ms:.1f}",
        f"{large_ms:.1f}",
        f"{max(large) * 1000:.1f}",
        f"{small_queries}/{large_queries}",
        f"{ratio:.2f}",
        f"≤ {goal:g}",
        met,
        ratio_met,
    )


def print_rows(rows: list[tuple[str, ...]]) -> None:
    headers = ("page", "10k ms", "1M ms", "1M max", "queries", "ratio", "goal", "1M", "ratio")
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    for r in [headers, tuple("-" * w for w in widths), *rows]:
        cells = [
            r[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)),
        ]
        print("  " + "  ".join(cells))
    verdicts = [r for r in rows if r[1] != "absent"]
    over = sum(r[7] != "met" for r in verdicts)
    ratios = sum(r[8] != "met" for r in verdicts)
    print(f"\n  {len(verdicts)} measured: {over} over the goal at 1M, {ratios} over the ratio")


# -- cost flat as history grows -----------------------------------------------------------


def measure_flat(args: argparse.Namespace) -> None:
    from bench.scale import statements_per_step, steps_round

    setup_django("postgres", args.filled, args.var_dir)
    from django.core.management import call_command

    if args.build:
        build("postgres", args.filled, args.filled_runs, args.var_dir)
    recreate("postgres", args.empty, args.var_dir)
    switch_to("postgres", args.empty, args.var_dir)
    call_command("migrate", verbosity=0)
    from bench.history_sql import table_counts

    switch_to("postgres", args.filled, args.var_dir)
    events = table_counts()["events"]
    print(f"\nThe inline step rate: {args.empty} (empty) against {args.filled} ({events:,} events)")
    print(f"  {args.runs} 10-step runs a round, {args.rounds} rounds each, alternately")
    print(f"  load before: {uptime()}")
    rates: dict[str, list[float]] = {args.empty: [], args.filled: []}
    for number in range(args.rounds):
        for name in (args.empty, args.filled) if number % 2 == 0 else (args.filled, args.empty):
            switch_to("postgres", name, args.var_dir)
            rates[name].append(steps_round(args.runs))
    statements = {}
    for name in (args.empty, args.filled):
        switch_to("postgres", name, args.var_dir)
        statements[name] = statements_per_step()
    empty, filled = (statistics.median(rates[n]) for n in (args.empty, args.filled))
    ratio = filled / empty
    for label, name, rate in (("empty ", args.empty, empty), ("filled", args.filled, filled)):
        rounds = ", ".join(f"{r:.0f}" for r in rates[name])
        print(f"  steps/s {label} {rate:8.0f}  rounds {rounds}")
    verdict = "met" if ratio >= FLAT_GOAL else "NOT met"
    print(f"  filled ÷ empty {ratio:8.2f}  (goal ≥ {FLAT_GOAL}: {verdict})")
    same = statements[args.empty] == statements[args.filled]
    print(
        f"  statements per step: empty {statements[args.empty]:.2f}, "
        f"filled {statements[args.filled]:.2f} ({'equal' if same else 'NOT equal'})"
    )
    print(f"  load after: {uptime()}")


# -- command line -------------------------------------------------------------------------


LIVE_HELP = (
    "runs in live states whatever the history's size (default: the newest twentieth of "
    "the runs holds them, 125 at 10,000 runs, 12,500 at a million); 125 keeps the live "
    "work of 10,000 runs"
)


def live_runs(text: str) -> int:
    """``--live``: a count of runs, zero or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--live: {text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--live: {value} is negative")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument(
        "--var-dir", type=Path, default=DEFAULT_VAR_DIR, help="where SQLite databases live"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("build", help="(re)build one database")
    one.add_argument("name", help="database name (million_...)")
    one.add_argument("--runs", type=int, default=1_000_000)
    one.add_argument("--live", type=live_runs, help=LIVE_HELP)
    pages = commands.add_parser("pages", help="every page at 1M runs against 10k, interleaved")
    pages.add_argument("--small", default="million_bench_10k")
    pages.add_argument("--large", default="million_bench_1m")
    pages.add_argument("--small-runs", type=int, default=10_000)
    pages.add_argument("--large-runs", type=int, default=1_000_000)
    pages.add_argument("--repeats", type=int, default=5, help="requests per page and size (5)")
    pages.add_argument("--build", action="store_true", help="build both databases first")
    pages.add_argument("--live", type=live_runs, help=LIVE_HELP + " (with --build)")
    flat = commands.add_parser("flat", help="the step rate: empty against 10M events")
    flat.add_argument("--empty", default="million_flat_empty")
    flat.add_argument("--filled", default="million_bench_1m")
    flat.add_argument("--filled-runs", type=int, default=1_000_000)
    flat.add_argument("--build", action="store_true", help="build --filled first")
    flat.add_argument("--runs", type=int, default=100, help="10-step runs per round (100)")
    flat.add_argument("--rounds", type=int, default=6)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "build":
        setup_django(args.database, args.name, args.var_dir)
        build(args.database, args.name, args.runs, args.var_dir, args.live)
    elif args.command == "pages":
        measure_pages(args)
    else:
        measure_flat(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
