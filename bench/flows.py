"""Flows at scale: building a flow of 10,000 members and 20,000 edges, executing it,
settling an upstream's 1,000 downstream members, and a no-op member beside a plain run.

In one process, inline (``workflows.testing.run_pending``), on a fresh temporary SQLite
file set up like the demo's, or on the PostgreSQL database ``DATABASE_URL`` names (the
script migrates it and leaves its rows there: give it a scratch database):

1. **member vs plain run**: ``--rounds`` interleaved rounds of ``--per-round`` plain
   runs (``start_run``, then run to completion) and as many no-op members (``add_to_flow``
   with nothing upstream, then run to completion) of the same one-step workflow; the
   median milliseconds per run of each, their ratio (the goal is at most 1.3), and the
   statements each costs;
2. **build**: a random DAG of ``--members`` members and ``--edges`` edges (edges only
   from a lower to a higher index, so no cycle): each member is added with one upstream
   in ``after=`` (member 0 has none and starts; all others stay ``blocked``), then the
   other edges are staged with ``add_dependency(expected_revision=...)``. The statements
   of one add, counted over the first and the last ``--sample`` adds (a fixed number,
   whatever the flow's size); members/s and edges/s over the adds between them, and
   over their first and last tenth;
3. **execute**: the flow is sealed (timed; ``--seal last``: after its members ran)
   and its members run, a ``run_pending`` round at a time, to completion or for at most
   ``--execute-seconds``: members executed/s; then one pass of the ``repair_flows``
   scanner over what is left, timed;
4. **settle**: one upstream with ``--fan`` downstream members ends: the seconds until
   every downstream member has started, the transactions it took and the most
   statements one of them ran (settling goes in bounded batches).

The script prints figures and asserts no timing; it exits non-zero only when a member
or a flow did not end as it should.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import configure_django, print_table  # noqa: E402
from bench.handlers import noop_chain  # noqa: E402

FlowsNoop = noop_chain("bench_flows_noop", 1, __name__)
# Statements that are transaction control, not work: left out of every count.
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


class Failed(Exception):
    """A member or a flow did not end as the benchmark expects."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=10_000, help="members of the big flow")
    parser.add_argument("--edges", type=int, default=20_000, help="edges of the big flow")
    parser.add_argument("--sample", type=int, default=100, help="adds whose statements count")
    parser.add_argument("--fan", type=int, default=1_000, help="downstream members of one")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of member vs plain")
    parser.add_argument("--per-round", type=int, default=50, help="runs of each per round")
    parser.add_argument("--seed", type=int, default=22, help="of the random DAG")
    parser.add_argument(
        "--seal",
        choices=("first", "last"),
        default="first",
        help="seal the big flow before its members run (default), or after",
    )
    parser.add_argument(
        "--execute-seconds",
        type=float,
        default=600.0,
        help="run the big flow's members for at most this long (default 600)",
    )
    args = parser.parse_args(argv)
    if min(args.members, args.sample, args.fan, args.rounds, args.per_round) < 1:
        parser.error("--members, --sample, --fan, --rounds and --per-round must be positive")
    if not args.members - 1 <= args.edges <= args.members * (args.members - 1) // 2:
        parser.error("--edges must be between --members - 1 and members x (members - 1) / 2")
    if 2 * args.sample > min(args.members - 1, args.edges - args.members + 1):
        parser.error("--sample is too large for the members and edges added")
    return args


@contextmanager
def database() -> Iterator[str]:
    """Set Django up on a fresh SQLite file, or on ``DATABASE_URL``'s database; yield
    what it is."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        with tempfile.TemporaryDirectory(prefix="flowsite-flows-") as tmp:
            configure_django(Path(tmp), None)
            yield f"SQLite {sqlite_version()}, fresh file (WAL, synchronous=NORMAL)"
            close_connections()
        return
    os.environ.update(
        DJANGO_SETTINGS_MODULE="flowsite.settings", FLOWSITE_EXECUTOR="inline", DJANGO_DEBUG="0"
    )
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.db import connection

    try:
        yield f"PostgreSQL {connection.cursor().connection.info.server_version}, {url}"
    finally:
        close_connections()


def sqlite_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


def close_connections() -> None:
    from django.db import connections

    connections.close_all()


@contextmanager
def statements() -> Iterator[list[str]]:
    """The SQL statements run inside the block, transaction control left out."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    found: list[str] = []
    with CaptureQueriesContext(connection) as captured:
        yield found
    found.extend(q["sql"] for q in captured.captured_queries)


def work(sql: list[str]) -> list[str]:
    return [statement for statement in sql if not statement.startswith(CONTROL)]


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run_to_completion() -> None:
    from workflows.testing import run_pending

    run_pending()


# -- 1. a no-op member beside a plain run -------------------------------------------------


@dataclass
class Comparison:
    plain_ms: list[float] = field(default_factory=list)
    member_ms: list[float] = field(default_factory=list)
    plain_statements: float = 0.0
    member_statements: float = 0.0


def compare(rounds: int, per_round: int) -> Comparison:
    """Interleaved rounds (plain first in even rounds, members first in odd ones), each
    run started (or added) then run to completion; one flow per round."""
    from django.utils import timezone

    import workflows

    since = timezone.now()
    result = Comparison()
    for number in range(rounds):
        flow = workflows.create_flow(f"bench member round {number}")

        def plain() -> None:
            for _ in range(per_round):
                workflows.start_run(FlowsNoop)
            run_to_completion()

        def members(flow: Any = flow, number: int = number) -> None:
            for index in range(per_round):
                workflows.add_to_flow(flow, FlowsNoop, member=f"r{number}-{index}")
            run_to_completion()

        order = [(plain, result.plain_ms), (members, result.member_ms)]
        for action, times in order if number % 2 == 0 else reversed(order):
            times.append(timed(action) * 1000 / per_round)
    flow = workflows.create_flow("bench member statements")
    with statements() as plain_sql:
        workflows.start_run(FlowsNoop)
        run_to_completion()
    with statements() as member_sql:
        workflows.add_to_flow(flow, FlowsNoop, member="counted")
        run_to_completion()
    result.plain_statements = len(work(plain_sql))
    result.member_statements = len(work(member_sql))
    check_all_completed(since)
    return result


def check_all_completed(since: Any) -> None:
    from workflows.models import Run

    unfinished = Run.objects.filter(created_at__gte=since).exclude(status="completed").count()
    if unfinished:
        raise Failed(f"{unfinished} runs did not complete")


# -- 2. building a big flow ---------------------------------------------------------------


def random_dag(members: int, edges: int, seed: int) -> tuple[list[int], list[tuple[int, int]]]:
    """Each member's first upstream (for ``after=``; member 0's is -1) and the other
    edges, in a random order; every edge goes from a lower index to a higher one."""
    rng = random.Random(seed)
    first = [-1] + [rng.randrange(index) for index in range(1, members)]
    chosen = {(up, down) for down, up in enumerate(first) if up >= 0}
    extra: list[tuple[int, int]] = []
    while len(chosen) < edges:
        up, down = sorted(rng.sample(range(members), 2))
        if (up, down) not in chosen:
            chosen.add((up, down))
            extra.append((up, down))
    return first, extra


def name(index: int) -> str:
    return f"m{index:05d}"


@dataclass
class Build:
    members: int
    edges: int
    member_seconds: list[float]
    edge_seconds: list[float]
    member_statements: tuple[float, float]
    edge_statements: tuple[float, float]
    flow: Any = None


def build(members: int, edges: int, sample: int, seed: int) -> Build:
    """Add every member (one upstream each in ``after=``), then every other edge."""
    import workflows

    first, extra = random_dag(members, edges, seed)
    flow = workflows.create_flow(f"bench flow of {members} members")

    def add_member(index: int) -> None:
        after = [name(first[index])] if first[index] >= 0 else []
        workflows.add_to_flow(flow, FlowsNoop, member=name(index), after=after)

    revision = members

    def add_edge(position: int) -> None:
        nonlocal revision
        up, down = extra[position]
        revision = workflows.add_dependency(flow, name(up), name(down), expected_revision=revision)

    member_seconds, member_statements = each_timed(add_member, members, sample)
    edge_seconds, edge_statements = each_timed(add_edge, len(extra), sample)
    return Build(
        members=members,
        edges=edges,
        member_seconds=member_seconds,
        edge_seconds=edge_seconds,
        member_statements=member_statements,
        edge_statements=edge_statements,
        flow=flow,
    )


def each_timed(
    action: Callable[[int], None], count: int, sample: int
) -> tuple[list[float], tuple[float, float]]:
    """Run ``action(0..count-1)``: the statements per call of the first and of the last
    ``sample`` calls, and the seconds of each call between them. Capturing statements
    sends the engine's statements through Django's cursor (``engine/sql/execute.py``),
    so the calls counted are not the calls timed."""
    seconds: list[float] = []
    with statements() as first:
        for index in range(sample):
            action(index)
    for index in range(sample, count - sample):
        began = time.perf_counter()
        action(index)
        seconds.append(time.perf_counter() - began)
    with statements() as last:
        for index in range(count - sample, count):
            action(index)
    return seconds, (len(work(first)) / sample, len(work(last)) / sample)


# -- 3. executing it ----------------------------------------------------------------------


@dataclass
class Execution:
    seal_first: bool
    seal_seconds: float
    executed: int
    execute_seconds: float
    rounds: int
    status: str
    repair_ms: float
    repair_found: int


def execute(flow: Any, members: int, budget: float, *, seal_first: bool) -> Execution:
    """Seal the flow (with ``seal_first``; else once its members have run), run its
    members round after round (a round of ``run_pending`` runs every member ready) for
    at most ``budget`` seconds, then time one pass of the ``repair_flows`` scanner over
    what is left blocked."""
    import workflows
    from workflows.models import Flow, Run
    from workflows.testing import run_pending
    from workflows.workers.scanners import repair_flows

    seal_seconds = timed(lambda: workflows.seal_flow(flow)) if seal_first else 0.0
    completed = Run.objects.filter(flow=flow, status="completed")
    began = time.perf_counter()
    rounds = executed = 0
    while executed < members and time.perf_counter() - began < budget:
        ran = run_pending(max_rounds=1).steps
        rounds += 1
        executed = completed.count()
        if not ran and executed < members:
            raise Failed(f"nothing left to run, and only {executed} of {members} completed")
    execute_seconds = time.perf_counter() - began
    if not seal_first:
        seal_seconds = timed(lambda: workflows.seal_flow(flow))
    status = Flow.objects.get(pk=flow.pk).status
    if executed == members and status != "completed":
        raise Failed(f"every member completed and the flow is {status}")
    started = time.perf_counter()
    found = repair_flows().found
    repair_ms = (time.perf_counter() - started) * 1000
    return Execution(
        seal_first, seal_seconds, executed, execute_seconds, rounds, status, repair_ms, found
    )


# -- 4. one upstream, many downstream -----------------------------------------------------


@dataclass
class Settle:
    downstream: int
    seconds: float
    transactions: int
    largest_transaction: int


def settle(fan: int) -> Settle:
    """``fan`` members after one: the seconds from the upstream's claim until every
    downstream member has started (its end settles them, batch after batch); then, on a
    second such flow, the transactions that took and the most statements of one."""
    seconds = fan_out(fan, "timed", measure=timed)
    sizes: list[int] = []
    fan_out(fan, "counted", measure=lambda action: transactions(action, sizes))
    return Settle(fan, seconds, len(sizes), max(sizes))


def fan_out(fan: int, label: str, *, measure: Callable[[Callable[[], Any]], Any]) -> Any:
    """Build one upstream with ``fan`` downstream members, end the upstream through
    ``measure``, check every downstream member started; return the measure. (They are
    not run: what is left of the big flow would run with them.)"""
    import workflows
    from workflows.engine.work_kinds import STEP
    from workflows.models import Run
    from workflows.workers.runner import execute as execute_unit

    flow = workflows.create_flow(f"bench settle {fan} {label}")
    upstream = workflows.add_to_flow(flow, FlowsNoop, member="up")
    for index in range(fan):
        workflows.add_to_flow(flow, FlowsNoop, member=f"d{index:04d}", after=["up"])
    step = upstream.steps.get()
    measured = measure(lambda: execute_unit(STEP, step.pk, owner="bench", chain=False))
    started = Run.objects.filter(flow=flow, status="running").count()
    if started != fan:
        raise Failed(f"{started} of {fan} downstream members started")
    return measured


def transactions(action: Callable[[], Any], sizes: list[int]) -> None:
    """Run ``action``, appending to ``sizes`` the statements of each transaction it
    committed (with the reads in autocommit just before it). Commits are seen by
    wrapping the connection's ``commit``, which ``atomic()`` calls on every database
    (PostgreSQL runs no ``BEGIN`` statement to count)."""
    from django.db import connection

    counted = [0]

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not sql.startswith(CONTROL):
            counted[0] += 1
        return execute(sql, params, many, context)

    commit = connection.commit

    def committed() -> None:
        commit()
        sizes.append(counted[0])
        counted[0] = 0

    connection.commit = committed  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(count):
            action()
    finally:
        del connection.commit


# -- report -------------------------------------------------------------------------------


def rate(count: int, seconds: Sequence[float]) -> str:
    return f"{count / sum(seconds):,.0f}"


def report(compared: Comparison, built: Build, executed: Execution, settled: Settle) -> None:
    plain = statistics.median(compared.plain_ms)
    member = statistics.median(compared.member_ms)
    tenth_m = max(1, built.members // 10)
    tenth_e = max(1, len(built.edge_seconds) // 10)
    extra_edges = len(built.edge_seconds)
    start_m, end_m = built.member_statements
    start_e, end_e = built.edge_statements
    sealed_when = (
        f"first: {built.members - 1:,} members blocked"
        if executed.seal_first
        else "last, once its members ran"
    )
    rows = [
        ("plain run, start + run: ms (median of rounds)", f"{plain:.2f}"),
        ("no-op member, add + run: ms (median of rounds)", f"{member:.2f}"),
        ("member / plain run (goal <= 1.3)", f"{member / plain:.2f}"),
        (
            "statements: plain run / member",
            f"{compared.plain_statements:.0f} / {compared.member_statements:.0f}",
        ),
        (
            f"members added/s ({built.members:,}, one upstream each)",
            rate(built.members, built.member_seconds),
        ),
        (
            "  first tenth / last tenth",
            f"{rate(tenth_m, built.member_seconds[:tenth_m])} / "
            f"{rate(tenth_m, built.member_seconds[-tenth_m:])}",
        ),
        (f"edges added/s ({extra_edges:,} add_dependency)", rate(extra_edges, built.edge_seconds)),
        (
            "  first tenth / last tenth",
            f"{rate(tenth_e, built.edge_seconds[:tenth_e])} / "
            f"{rate(tenth_e, built.edge_seconds[-tenth_e:])}",
        ),
        ("statements per member add: start / end", f"{start_m:.1f} / {end_m:.1f}"),
        ("statements per edge add: start / end", f"{start_e:.1f} / {end_e:.1f}"),
        (f"seal the flow ({sealed_when}): s", f"{executed.seal_seconds:.2f}"),
        (
            f"members executed/s (run_pending, flow {'sealed' if executed.seal_first else 'open'})",
            f"{executed.executed / executed.execute_seconds:,.1f}",
        ),
        (
            "  executed / seconds / rounds",
            f"{executed.executed:,} / {executed.execute_seconds:.0f} / {executed.rounds}",
        ),
        ("  flow status afterwards", executed.status),
        (
            f"then one repair_flows pass: ms ({executed.repair_found:,} found)",
            f"{executed.repair_ms:,.0f}",
        ),
        (f"settle {settled.downstream:,} downstream members: s", f"{settled.seconds:.2f}"),
        (
            "  transactions / most statements in one",
            f"{settled.transactions} / {settled.largest_transaction}",
        ),
    ]
    print_table(rows)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with database() as description:
        import django

        print("Flowsite flows at scale (bench/flows.py)")
        print(f"  {description}")
        print(f"  Python {platform.python_version()}, Django {django.get_version()}, ", end="")
        print(f"{os.cpu_count()} CPUs, {platform.platform()}")
        print(
            f"  {args.members:,} members, {args.edges:,} edges (seed {args.seed}); "
            f"{args.rounds} rounds of {args.per_round} runs of each; fan {args.fan:,}"
        )
        try:
            compared = compare(args.rounds, args.per_round)
            built = build(args.members, args.edges, args.sample, args.seed)
            executed = execute(
                built.flow, args.members, args.execute_seconds, seal_first=args.seal == "first"
            )
            settled = settle(args.fan)
        except Failed as failed:
            print(f"FAILED: {failed}", file=sys.stderr)
            return 1
        report(compared, built, executed, settled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
