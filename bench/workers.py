"""Flowsite with real worker processes: step throughput, step-to-step latency, timer lateness.

What it measures, for each database (a fresh temporary SQLite file, and/or a database of
its own on the PostgreSQL server at 127.0.0.1:5432), with real processes started the way
an operator starts them (``manage.py workflows_worker`` with 2 workers on django-q2's ORM broker,
and ``manage.py workflows_sweeper``), all using ``bench.settings``:

* **step transitions/s**: 50 runs of a chain of 10 no-op tasks are started at once; the
  figure is steps completed divided by the seconds from the first ``start_run`` to the
  last run's ``finished_at`` (database clock). Repeated ``--rounds`` times.
* **step-to-step latency**: single runs of the same workflow, one at a time (after a
  random pause, so that starts do not line up with the broker's poll cycle); the gap
  between consecutive steps' ``started_at`` (database clock; one full step cycle:
  handler, fenced completion and claim of the next step). When a worker chains, a step's
  ``step.completed`` event and the next step's ``step.started`` event are written by the
  same transaction with the same timestamp, so events cannot show this gap. Also
  printed: queue pickup, from the run's creation to its first step's ``started_at``.
* **timer lateness**: 1,000 runs of a one-step ``Sleep(until=...)`` workflow whose due
  times are spread evenly over the next minute (from 15 s on, so that starting them
  stays ahead of their due times); lateness is ``Timer.fired_at`` (database clock)
  minus ``Timer.due_at``.
* **django-q2 alone**, through the same cluster and database, without the engine: no-op
  ``async_task`` calls per second, and the gap between tasks of a chain in which each
  task sends the next; printed beside the reference figures quoted from the design
  notes (about 380 no-op tasks/s and 200 ms per chained task).

With ``--limits`` the cost of limits is measured (reported, never asserted): rounds of
the same batch interleaved three ways, the plain chain, the chain whose every task has a
concurrency key (one per run, ``max_concurrent=1``: the limit never binds, a run's
steps follow one another) and the chain whose every task has a rate limit far above
what the workers reach (``1000/s``); each limited figure is printed beside the plain one
and as its ratio. A worker chains into limited work through the claim's own checks, so
the steps sent through the queue should be as many as for the plain chain: printed, to
show it.

With ``--event-notify`` (PostgreSQL) the cost of the event table's ``NOTIFY`` trigger
(migration 0019, wake-ups on commit) is measured the same way: rounds interleaved with
the trigger dropped and created again, each figure printed beside the other as a ratio.
``NOTIFY`` takes a lock at commit that serialises notifying transactions database-wide,
so this is the figure that says whether the per-step path pays for it.

With ``--workers 1,2,4`` the throughput rounds are repeated with a cluster of each size,
interleaved (each round runs every size in turn, after every other phase, which runs
with the first). With ``--peers`` the peers the goals name are
measured in the same invocation once the cluster is stopped (``bench/peers.py``), and
each goal's ratio is printed beside them: on SQLite the workers' steps/s over the inline
rate (``bench/throughput.py``) and over django-q2 alone; on PostgreSQL over DBOS.

Why: ``bench/throughput.py`` measures the engine's own cost in one process. Here the
queue, the process boundaries, the sweeper's polling and the database's locking are in
the path, as in a deployment.

The script prints figures and never asserts timings. It exits non-zero when a phase does
not finish within its bounded wait or a run does not complete as it should. Every
process it starts gets a session of its own and its process group is killed at the end,
also on errors and Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import logging
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: import bench.peers from the repository
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import cpu
from bench.peers import Peer, measure_ceilings, measure_peers

REPO_ROOT = Path(__file__).resolve().parent.parent
MANAGE = REPO_ROOT / "manage.py"
SETTINGS_MODULE = "bench.settings"
STEPS_PER_RUN = 10
NOOP_WORKFLOW = "bench_workers_noop_10"
# ``--limits``: the same chain under a concurrency key, and under a rate limit, neither
# binding (bench/benchapp/flows.py), by the label the report gives them.
LIMITED_WORKFLOWS = {
    "concurrency key": "bench_workers_keyed_10",
    "rate limit": "bench_workers_rated_10",
}
UNLIMITED = "unlimited"
# ``--event-notify``: the variants, the first the baseline.
WITHOUT_NOTIFY, WITH_NOTIFY = "without trigger", "with NOTIFY trigger"
SLEEP_WORKFLOW = "bench_workers_sleep_until"

POSTGRES = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
POSTGRES_MAINTENANCE_DB = "postgres"
# BENCH_PG_SUFFIX names the databases apart when several benchmarks share the server.
POSTGRES_BENCH_DB = "flowsite_bench" + os.environ.get("BENCH_PG_SUFFIX", "")

# django-q2 alone on this kind of machine, as quoted for comparison when this benchmark
# was asked for; printed as given. The script measures its own django-q2-alone figures
# (same cluster, same database) beside them.
REFERENCE_TASKS_PER_SECOND = 380
REFERENCE_CHAINED_STEP_MS = 200

QUEUE_CHAINS = 5
# ``--scaling``: issue #42's "more workers never cost" and its goals.
SCALING_DEFAULTS: dict[str, Any] = {
    "database": "postgres",
    "workers": [1, 2, 4, 8],
    "runs": 200,
    "latency_runs": 0,
    "timers": 0,
    "queue_tasks": 0,
}
SCALING_RATE_GOAL = 0.9  # the largest cluster's steps/s over the best size's, at least
SCALING_LOCK_GOAL_MS = 100  # longest lock wait, at most
SCALING_CPU_GOAL = 1.15  # the highest CPU per step over the lowest, at most
STOP_GRACE_SECONDS = 20
READY_TIMEOUT_SECONDS = 120
LOG_TAIL_LINES = 40


class BenchError(Exception):
    """A phase did not finish as it should; the message says which and why."""


class Interrupted(BaseException):
    """SIGTERM received: unwind like Ctrl-C so every started process is stopped."""


# -- figures -------------------------------------------------------------------------------


@dataclass
class Spread:
    """Median, 99th percentile and extremes of a list of milliseconds."""

    count: int
    p50: float
    p99: float
    minimum: float
    maximum: float

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> Spread:
        ordered = sorted(values_ms)
        if not ordered:
            raise BenchError("no samples to summarise")
        return cls(
            count=len(ordered),
            p50=percentile(ordered, 50),
            p99=percentile(ordered, 99),
            minimum=ordered[0],
            maximum=ordered[-1],
        )


def percentile(ordered: Sequence[float], pct: float) -> float:
    """Linear-interpolated percentile of already sorted values (numpy's default method)."""
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * pct / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class LockWaits:
    """Heavyweight-lock waits of the database's sessions, sampled from ``pg_stat_activity``
    (``wait_event_type = 'Lock'``: a row, tuple, transaction id or relation lock) every
    ``SAMPLE_SECONDS`` during a throughput round.

    ``longest_ms`` is the longest wait seen: for each waiting statement (pid and
    ``query_start``), the time from its ``query_start`` to the last sample that saw it
    waiting, an upper bound of the wait (the statement may have run a little before it
    queued); a wait shorter than the sampling interval may go unseen, one of 100 ms cannot.
    """

    samples: int = 0
    waiting_samples: int = 0  # samples that saw at least one session waiting
    statements: int = 0  # distinct waiting statements
    longest_ms: float = 0.0
    longest_query: str = ""
    by_lock: dict[str, int] = field(default_factory=dict)  # wait_event -> statements


SAMPLE_SECONDS = 0.01


class LockSampler:
    """Samples lock waits on a connection of its own, in a thread, while it is entered."""

    QUERY = (
        "SELECT pid, query_start, wait_event,"
        " extract(epoch FROM clock_timestamp() - query_start) * 1000, left(query, 200)"
        " FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )

    def __init__(self, url: str) -> None:
        self.url = url
        self.figures = LockWaits()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def __enter__(self) -> LockSampler:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._error is not None and exc_info[0] is None:
            raise BenchError(f"lock sampling failed: {self._error}")

    def _sample(self) -> None:
        import psycopg

        seen: set[tuple[int, Any]] = set()
        try:
            with psycopg.connect(self.url, autocommit=True, application_name="bench-locks") as db:
                while not self._stop.is_set():
                    rows = db.execute(self.QUERY).fetchall()
                    self.figures.samples += 1
                    self.figures.waiting_samples += bool(rows)
                    for pid, query_start, event, waited_ms, query in rows:
                        if (pid, query_start) not in seen:
                            seen.add((pid, query_start))
                            self.figures.statements += 1
                            by_lock = self.figures.by_lock
                            by_lock[event] = by_lock.get(event, 0) + 1
                        if waited_ms is not None and float(waited_ms) > self.figures.longest_ms:
                            self.figures.longest_ms = float(waited_ms)
                            self.figures.longest_query = query
                    self._stop.wait(SAMPLE_SECONDS)
        except Exception as exc:  # reported by __exit__
            self._error = exc


@dataclass
class ThroughputRound:
    runs: int
    steps_completed: int
    seconds: float
    start_seconds: float
    steps_via_queue: int
    worker_processes: int
    held: int = 0  # step.held events: a limit that made work wait (none should)
    # Seconds from the last run's end until the queue was empty: the nudges of work
    # the workers pulled before its message came, each read and dropped. Outside the
    # window; the next round starts on an empty queue.
    drain_seconds: float = 0.0
    # CPU seconds by role (bench/cpu.py) from before the starts until the queue was empty.
    cpu: dict[str, float] = field(default_factory=dict)
    # PostgreSQL: lock waits seen in ``pg_stat_activity`` during the round (LockWaits).
    lock_waits: LockWaits | None = None

    @property
    def steps_per_second(self) -> float:
        return self.steps_completed / self.seconds


@dataclass
class Figures:
    """Everything measured against one database."""

    database: str
    facts: dict[str, str]
    workers: int
    throughput: list[ThroughputRound] = field(default_factory=list)
    # Further cluster sizes (--workers 1,2,4) and the larger batch (--large-runs), by size.
    throughput_by_workers: dict[int, list[ThroughputRound]] = field(default_factory=dict)
    large_by_workers: dict[int, list[ThroughputRound]] = field(default_factory=dict)
    # --limits: interleaved rounds by variant (UNLIMITED, then LIMITED_WORKFLOWS' labels).
    limits: dict[str, list[ThroughputRound]] = field(default_factory=dict)
    # --event-notify: interleaved rounds without and with the event table's trigger.
    event_notify: dict[str, list[ThroughputRound]] = field(default_factory=dict)
    peers: list[Peer] = field(default_factory=list)
    step_gap: Spread | None = None
    pickup: Spread | None = None
    run_duration: Spread | None = None
    timers: TimerFigures | None = None
    queue_alone: QueueFigures | None = None
    diagnostics: dict[str, int] = field(default_factory=dict)

    @property
    def steps_per_second(self) -> float:
        return statistics.median(r.steps_per_second for r in self.throughput)


# -- arguments -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--database",
        choices=["sqlite", "postgres", "both"],
        default="both",
        help="where to run (default both: SQLite, then PostgreSQL at 127.0.0.1:5432)",
    )
    parser.add_argument(
        "--workers",
        type=worker_counts,
        default=[2],
        help="cluster workers, or a comma-separated list such as 1,2,4: the throughput "
        "rounds run with a cluster of each size, interleaved round by round, every other "
        "phase with the first (default 2)",
    )
    parser.add_argument(
        "--runs", type=int, default=50, help="concurrent runs per throughput round (default 50)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (default 3)")
    parser.add_argument(
        "--large-runs",
        type=int,
        default=0,
        help="also time a larger batch of this many runs in each round, for steady "
        "throughput (default 0: none)",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="afterwards, with the cluster stopped, measure the peers the goals compare "
        "with (bench/peers.py: inline bench/throughput.py, ../shared/peers/ DBOS, "
        "django-q2 alone and the ORM ceiling; FLOWSITE_PEERS_DIR names another "
        "peers directory) and print each ratio",
    )
    parser.add_argument(
        "--ceilings",
        action="store_true",
        help="afterwards, with the cluster stopped, measure only issue #26's ceilings "
        "(on PostgreSQL ../shared/peers/pg_limit, django_2proc: tx/s and CPU per tx; "
        "--peers includes them) and print the goals' ratios",
    )
    parser.add_argument(
        "--latency-runs",
        type=int,
        default=30,
        help="single runs, one at a time, for step-to-step latency (default 30; 0 skips)",
    )
    parser.add_argument(
        "--timers", type=int, default=1000, help="timers to fire (default 1000; 0 skips)"
    )
    parser.add_argument(
        "--timer-window",
        type=float,
        default=60.0,
        help="seconds over which the timers fall due, from the start of the phase (default 60)",
    )
    parser.add_argument(
        "--queue-tasks",
        type=int,
        default=500,
        help="no-op tasks for the django-q2-alone baseline (default 500; 0 skips it)",
    )
    parser.add_argument(
        "--conn-max-age",
        type=int,
        default=None,
        help="experiment: set CONN_MAX_AGE (seconds) in every process instead of the "
        "demo project's value (0 opens a new connection per request, task and poll)",
    )
    parser.add_argument(
        "--redis",
        metavar="URL",
        default=None,
        help="experiment: django-q2's broker on Redis at URL (FLOWSITE_REDIS_URL) instead "
        "of the database, so the queue's writes leave the database",
    )
    parser.add_argument(
        "--limits",
        action="store_true",
        help="also measure the cost of limits: --rounds rounds of --runs runs, each round "
        "the plain chain, the chain under a concurrency key and under a rate limit "
        "(neither binding), printed side by side with their ratios",
    )
    parser.add_argument(
        "--event-notify",
        action="store_true",
        help="also measure the cost of the event table's NOTIFY trigger (PostgreSQL): "
        "--rounds rounds of --runs runs, each without then with the trigger",
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="issue #42's 'more workers never cost': PostgreSQL, clusters of 1, 2, 4 and 8 "
        "workers interleaved, rounds of 200 runs, lock waits sampled, nothing else measured "
        "(each of these defaults can still be given; add --redis URL for the Redis broker)",
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    parser.add_argument("--results-file", type=Path, help=argparse.SUPPRESS)
    if "--scaling" in (sys.argv[1:] if argv is None else argv):
        parser.set_defaults(**SCALING_DEFAULTS)
    args = parser.parse_args(argv)
    if min(args.runs, args.rounds) < 1:
        parser.error("--runs and --rounds must be positive")
    if min(args.latency_runs, args.timers, args.queue_tasks, args.large_runs) < 0:
        parser.error(
            "--latency-runs, --timers, --queue-tasks and --large-runs must not be negative"
        )
    if args.timer_window < 15:
        parser.error("--timer-window must be at least 15 seconds")
    return args


def worker_counts(text: str) -> list[int]:
    """``--workers``: one positive count, or several separated by commas."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of worker counts") from None
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"{text!r}: worker counts must be positive and distinct")
    return counts


# -- processes -----------------------------------------------------------------------------


class Processes:
    """The subprocesses of one benchmark, each in its own session, always stopped at exit.

    Stopping sends SIGTERM to each process (the worker cluster and the sweeper both shut down
    cleanly on it), waits, then SIGKILLs whatever is left in each process group:
    the cluster's workers are children of its sentinel and would otherwise outlive a killed
    parent. Leftovers are found through ``/proc`` (Linux).
    """

    def __init__(self, log_dir: Path, env: dict[str, str]) -> None:
        self.log_dir = log_dir
        self.env = env
        self.started: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        self.stopped: list[Path] = []  # logs of processes stopped before the end

    def manage(self, name: str, *args: str, timeout: float) -> None:
        """Run a management command to completion (bounded); raise with its log if it fails."""
        log = self.log_dir / f"{name}.log"
        proc = self._spawn(name, args, log)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise BenchError(f"manage.py {' '.join(args)} did not finish in {timeout:g}s") from exc
        if returncode != 0:
            raise BenchError(f"manage.py {' '.join(args)} exited with {returncode}:\n{tail(log)}")

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        """Start a long-running management command in the background (``env``: variables
        that differ from the benchmark's)."""
        self._spawn(name, args, self.log_dir / f"{name}.log", env)

    def _spawn(
        self, name: str, args: Sequence[str], log: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with log.open("ab") as output:
            proc = subprocess.Popen(
                [sys.executable, str(MANAGE), *args],
                cwd=REPO_ROOT,
                # PGAPPNAME names the process's PostgreSQL backends (bench/cpu.py).
                env={**self.env, "PGAPPNAME": f"bench-{name}", **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append((name, proc, log))
        return proc

    def check_alive(self) -> None:
        """Raise if a background process has exited."""
        for name, proc, log in self.started:
            if name in {"migrate"}:
                continue
            if proc.poll() is not None:
                raise BenchError(f"{name} exited with {proc.returncode}:\n{tail(log)}")

    def pids(self, prefix: str) -> list[int]:
        """Every live process of the background commands whose name starts ``prefix``
        (a worker cluster's sentinel, pusher, monitor and workers)."""
        return [
            pid
            for name, proc, _ in self.started
            if name.startswith(prefix)
            for pid in self._group_members(proc.pid)
        ]

    def logs(self) -> list[Path]:
        return list(dict.fromkeys([*self.stopped, *(log for _, _, log in self.started)]))

    def stop_all(self) -> None:
        """Stop every process; a second Ctrl-C or SIGTERM cannot cut this short."""
        previous = {
            sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            self._stop_all()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self, name: str) -> None:
        """Stop the background processes called ``name`` (to restart them differently)."""
        chosen = [entry for entry in self.started if entry[0] == name]
        self._stop(chosen)
        self.started = [entry for entry in self.started if entry[0] != name]
        self.stopped += [log for _, _, log in chosen]

    def _stop_all(self) -> None:
        self._stop(self.started)

    def _stop(self, started: list[tuple[str, subprocess.Popen[bytes], Path]]) -> None:
        for _, proc, _ in started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for name, proc, _ in started:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"  {name} did not stop within {STOP_GRACE_SECONDS}s; killing it")
        for _, proc, _ in started:
            for pid in self._group_members(proc.pid):  # leftovers, e.g. orphaned workers
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.wait(timeout=10)

    def _group_members(self, pgid: int) -> list[int]:
        """Processes still in the group ``pgid`` that this benchmark started.

        A group whose leader has exited can be empty and its id reused by an unrelated
        group, so members are matched by group id *and* by this benchmark's own
        ``FLOWSITE_VAR_DIR`` in their environment, never by the group id alone.
        """
        marker = f"FLOWSITE_VAR_DIR={self.env['FLOWSITE_VAR_DIR']}".encode()
        members = []
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                stat = (entry / "stat").read_text()
                group = int(stat.rsplit(")", 1)[1].split()[2])
                if group == pgid and marker in (entry / "environ").read_bytes().split(b"\0"):
                    members.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue  # exited meanwhile, or not readable: not ours to kill
        return members


def tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {log})"
    return "\n".join(f"    | {line}" for line in text[-lines:])


def wait_for(
    what: str, done: Callable[[], bool], timeout: float, processes: Processes, poll: float = 0.02
) -> None:
    """Poll ``done`` until it is true; raise a clear error after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:g}s waiting for {what}")
        processes.check_alive()
        time.sleep(poll)


# -- databases -----------------------------------------------------------------------------


@contextmanager
def postgres_database(database: str = POSTGRES_BENCH_DB) -> Iterator[str]:
    """Create a benchmark's own PostgreSQL database, yield its URL, drop it afterwards.

    Only the database named ``database`` (``POSTGRES_BENCH_DB`` unless a benchmark
    names its own) is ever created or dropped.
    """
    import psycopg
    from psycopg import sql

    def admin(statement: sql.Composed) -> None:
        with psycopg.connect(
            **POSTGRES, dbname=POSTGRES_MAINTENANCE_DB, autocommit=True, connect_timeout=10
        ) as connection:
            connection.execute(statement)

    name = sql.Identifier(database)
    try:
        admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        admin(sql.SQL("CREATE DATABASE {}").format(name))
    except psycopg.OperationalError as exc:
        raise BenchError(f"PostgreSQL at {POSTGRES['host']}:{POSTGRES['port']}: {exc}") from exc
    try:
        yield f"postgres://{POSTGRES['user']}@{POSTGRES['host']}:{POSTGRES['port']}/{database}"
    finally:
        admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


@contextmanager
def database_url(database: str, tmp: Path) -> Iterator[str]:
    if database == "postgres":
        with postgres_database() as url:
            yield url
    else:
        yield f"sqlite:///{tmp / 'bench.sqlite3'}"


def bench_env(
    url: str,
    tmp: Path,
    workers: int,
    conn_max_age: int | None = None,
    redis: str | None = None,
) -> dict[str, str]:
    """The environment of the subprocesses, and of this process's own Django."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in {
            "DATABASE_URL",
            "FLOWSITE_REDIS_URL",
            "FLOWSITE_WORKERS",
            "Q_CLUSTER_NAME",
            "BENCH_CONN_MAX_AGE",
        }
    }
    if conn_max_age is not None:
        env["BENCH_CONN_MAX_AGE"] = str(conn_max_age)
    if redis is not None:
        env["FLOWSITE_REDIS_URL"] = redis
    env.update(
        DJANGO_SETTINGS_MODULE=SETTINGS_MODULE,
        DATABASE_URL=url,
        FLOWSITE_VAR_DIR=str(tmp),
        # DEBUG would record every query of these long-lived processes in memory.
        DJANGO_DEBUG="0",
        BENCH_WORKERS=str(workers),
        PYTHONUNBUFFERED="1",
    )
    return env


def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    for key in ("FLOWSITE_REDIS_URL", "FLOWSITE_WORKERS", "Q_CLUSTER_NAME", "BENCH_CONN_MAX_AGE"):
        if key not in env:
            os.environ.pop(key, None)
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    import django

    django.setup()
    # This process only enqueues; django-q2 would log every message it sends.
    logging.getLogger("django-q").setLevel(logging.WARNING)


def load_average() -> str:
    """The 1-minute load average: other work on the machine skews every figure."""
    return f"{os.getloadavg()[0]:.2f}"


def database_facts(database: str) -> dict[str, str]:
    import django
    from django.db import connection

    facts = {
        "django": django.get_version(),
        "python": platform.python_version(),
        "load_before": load_average(),
    }
    with connection.cursor() as cursor:
        if database == "postgres":
            cursor.execute("show server_version")
            facts["server"] = f"PostgreSQL {cursor.fetchone()[0]}"
            cursor.execute("show synchronous_commit")
            facts["settings"] = f"synchronous_commit={cursor.fetchone()[0]}"
        else:
            cursor.execute("select sqlite_version()")
            facts["server"] = f"SQLite {cursor.fetchone()[0]}"
            cursor.execute("pragma journal_mode")
            journal = cursor.fetchone()[0]
            cursor.execute("pragma synchronous")
            level = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(cursor.fetchone()[0], "?")
            facts["settings"] = f"journal_mode={journal}, synchronous={level}, BEGIN IMMEDIATE"
    return facts


# -- phases --------------------------------------------------------------------------------


def start_noop_runs(count: int, business_key: str, workflow: str = NOOP_WORKFLOW) -> None:
    from workflows import start_run

    for index in range(count):
        start_run(workflow, {"n": index}, business_key=business_key)


def runs_finished(business_key: str, count: int) -> Callable[[], bool]:
    """A check that every run of the batch is final; a failed run is an error at once."""
    from workflows.models import Run
    from workflows.status import RUN_FINAL, RunStatus

    def done() -> bool:
        statuses = list(Run.objects.filter(business_key=business_key).values_list("status"))
        failed = sum(status == RunStatus.FAILED for (status,) in statuses)
        if failed:
            raise BenchError(f"{failed} run(s) of batch {business_key!r} failed")
        return sum(status in RUN_FINAL for (status,) in statuses) == count

    return done


def check_completed(business_key: str, runs: int, steps_per_run: int) -> int:
    """Check from the database that every run and step completed; return steps completed."""
    from workflows.models import Run, Step
    from workflows.status import RunStatus, StepStatus

    completed_runs = Run.objects.filter(
        business_key=business_key, status=RunStatus.COMPLETED
    ).count()
    completed_steps = Step.objects.filter(
        run__business_key=business_key, status=StepStatus.COMPLETED
    ).count()
    if completed_runs != runs or completed_steps != runs * steps_per_run:
        raise BenchError(
            f"batch {business_key!r}: {completed_runs}/{runs} runs and "
            f"{completed_steps}/{runs * steps_per_run} steps completed"
        )
    return completed_steps


def warm_up(
    processes: Processes, workers: int, workflow: str = NOOP_WORKFLOW, label: str = ""
) -> float:
    """Start a few runs and wait until the cluster has run them (imports, connections).
    ``label`` tells apart the warm-ups of a cluster size started more than once."""
    began = time.monotonic()
    runs, key = 2 * workers, f"warm-up-{workers}-{workflow}{label}"
    start_noop_runs(runs, key, workflow)
    wait_for(
        "the worker cluster to run the warm-up runs (is it starting? see its log)",
        runs_finished(key, runs),
        READY_TIMEOUT_SECONDS,
        processes,
    )
    check_completed(key, runs, STEPS_PER_RUN)
    return time.monotonic() - began


def measure_latency(processes: Processes, runs: int) -> tuple[Spread, Spread, Spread]:
    """Single runs, one at a time: step-to-step gaps, queue pickup and run duration (ms)."""
    from django.conf import settings

    from workflows.models import Run, Step

    poll = float(settings.Q_CLUSTER.get("poll", 0.2))
    gaps, pickups, durations = [], [], []
    for index in range(runs):
        key = f"latency-{index}"
        # Starting each run right after the previous one ended would land every start at
        # the same point of the broker's poll cycle; a random pause spreads them over it.
        time.sleep(random.uniform(0, 2 * poll))
        start_noop_runs(1, key)
        wait_for(f"latency run {index}", runs_finished(key, 1), 60, processes, poll=0.005)
        check_completed(key, 1, STEPS_PER_RUN)
        run = Run.objects.get(business_key=key)
        started = list(
            Step.objects.filter(run=run).order_by("name").values_list("started_at", flat=True)
        )
        gaps += [ms(later - earlier) for earlier, later in itertools.pairwise(started)]
        pickups.append(ms(started[0] - run.created_at))
        durations.append(ms(run.finished_at - run.created_at))
    return Spread.of(gaps), Spread.of(pickups), Spread.of(durations)


def measure_throughput(
    processes: Processes, runs: int, label: str, workflow: str = NOOP_WORKFLOW
) -> ThroughputRound:
    """Start ``runs`` runs of ``workflow`` (a chain of ``STEPS_PER_RUN`` steps) at once;
    seconds from the first start to the last run's end."""
    from django.db.models import Max
    from django.utils import timezone

    from workflows.models import Event, Run, Step

    key = f"throughput-{label}"
    cpu_before = cpu.snapshot(cpu_groups(processes))
    sampler = lock_sampler()
    with sampler or contextlib.nullcontext():
        began = timezone.now()
        start_noop_runs(runs, key, workflow)
        start_seconds = (timezone.now() - began).total_seconds()
        wait_for(f"throughput round {label}", runs_finished(key, runs), 600, processes)
    steps = check_completed(key, runs, STEPS_PER_RUN)
    finished = time.monotonic()
    wait_for(f"the queue to empty after round {label}", queue_empty, 600, processes)
    drain_seconds = time.monotonic() - finished
    cpu_after = cpu.snapshot(cpu_groups(processes))
    last_finished = Run.objects.filter(business_key=key).aggregate(last=Max("finished_at"))["last"]
    via_queue = Event.objects.filter(run__business_key=key, type="step.ready").count()
    owners = Step.objects.filter(run__business_key=key).values_list("lease_owner", flat=True)
    return ThroughputRound(
        runs=runs,
        steps_completed=steps,
        seconds=(last_finished - began).total_seconds(),
        start_seconds=start_seconds,
        steps_via_queue=via_queue,
        worker_processes=len({owner.rsplit(":", 1)[0] for owner in owners}),
        held=Event.objects.filter(run__business_key=key, type="step.held").count(),
        drain_seconds=drain_seconds,
        cpu=cpu.cpu_by_role(
            cpu_before, cpu_after, {int(owner.split(":")[1]) for owner in owners if owner}
        ),
        lock_waits=sampler.figures if sampler else None,
    )


def lock_sampler() -> LockSampler | None:
    """On PostgreSQL, a sampler of lock waits on this benchmark's database."""
    from django.db import connection

    return LockSampler(os.environ["DATABASE_URL"]) if connection.vendor == "postgresql" else None


def cpu_groups(processes: Processes) -> dict[str, list[int]]:
    """The processes a round's CPU is counted over (``bench/cpu.py``), by group: the
    cluster, the sweeper, this script, and on PostgreSQL the backends of this database
    (this script's apart) and the server's own processes."""
    from django.db import connection

    groups = {
        "cluster": processes.pids("worker-"),
        "sweeper": processes.pids("sweeper"),
        "script": [os.getpid()],
    }
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, application_name, pid = pg_backend_pid() FROM pg_stat_activity"
                " WHERE datname = current_database() AND backend_type = 'client backend'"
            )
            backends = cursor.fetchall()
        groups["script backend"] = [pid for pid, _, own in backends if own]
        groups["sweeper backends"] = [pid for pid, app, _ in backends if app == "bench-sweeper"]
        groups["backends"] = [
            pid for pid, app, own in backends if not own and app != "bench-sweeper"
        ]
        groups["server"] = cpu.server_processes()
    return groups


def queue_empty() -> bool:
    """Whether the cluster's broker holds no message, delivered or not: on the ORM broker
    a message is deleted when acknowledged, on Redis when popped."""
    from django_q.brokers import get_broker
    from django_q.conf import Conf
    from django_q.models import OrmQ

    return not OrmQ.objects.exists() if Conf.ORM else get_broker().queue_size() == 0


@dataclass
class TimerFigures:
    lateness: Spread
    quiet_lateness: Spread | None
    created_late: int
    start_seconds: float
    lead_seconds: float


def measure_timers(processes: Processes, count: int, window: float) -> TimerFigures:
    """Start ``count`` sleeping runs due over ``window`` seconds; lateness of each timer (ms).

    Due times start a quarter into the window, so that starting the runs (in due order)
    stays ahead of them; a timer created after its due time is counted and left out.
    Timers due after the last run was started are also summarised on their own: they
    fire while the benchmark itself no longer writes.
    """
    from django.db.models import F
    from django.utils import timezone

    from workflows import start_run
    from workflows.models import Timer
    from workflows.status import TimerStatus

    lead = window / 4
    began = timezone.now()
    spacing = (window - lead) / count
    for index in range(count):
        due = began + timedelta(seconds=lead + index * spacing)
        start_run(SLEEP_WORKFLOW, {"due_at": due.isoformat()}, business_key="timers")
    all_started = timezone.now()
    timers = Timer.objects.filter(run__business_key="timers")
    if timers.count() != count:
        raise BenchError(f"expected {count} timers, found {timers.count()}")
    remaining = (began + timedelta(seconds=window) - timezone.now()).total_seconds()
    wait_for(
        f"{count} timers to fire",
        lambda: not timers.filter(status=TimerStatus.SCHEDULED).exists(),
        remaining + 90,
        processes,
        poll=0.5,
    )
    check_completed("timers", count, 1)
    on_time = timers.filter(created_at__lte=F("due_at"))
    lateness = [ms(fired - due) for fired, due in on_time.values_list("fired_at", "due_at")]
    quiet = [
        ms(fired - due)
        for fired, due in on_time.filter(due_at__gt=all_started).values_list("fired_at", "due_at")
    ]
    return TimerFigures(
        lateness=Spread.of(lateness),
        quiet_lateness=Spread.of(quiet) if quiet else None,
        created_late=timers.filter(created_at__gt=F("due_at")).count(),
        start_seconds=(all_started - began).total_seconds(),
        lead_seconds=lead,
    )


@dataclass
class QueueFigures:
    """django-q2 alone, through the same cluster: no-op tasks/s and chained-task latency."""

    tasks: int
    tasks_per_second: float
    hop: Spread


def measure_queue_alone(processes: Processes, tasks: int, chains: int, hops: int) -> QueueFigures:
    """The queue without the engine, on the same cluster and database.

    Throughput: ``tasks`` no-op ``async_task`` calls, from the first send to the last
    result's ``stopped`` (each task saves its result, one insert, whatever
    ``save_limit`` says). Latency: ``chains`` chains of
    ``hops`` tasks in which each task sends the next; the gap between consecutive tasks'
    own start times (handler clock).
    """
    from django.db.models import Max
    from django.utils import timezone
    from django_q.models import Success, Task
    from django_q.tasks import async_task

    # The project keeps no successful results (save_limit -1); these tasks ask for theirs
    # (save=True), which django-q2 then stores without trimming the table.
    Task.objects.filter(group__startswith="queue-").delete()
    began = timezone.now()
    for _ in range(tasks):
        async_task("bench.benchapp.tasks.noop", group="queue-noop", save=True)
    done = Success.objects.filter(group="queue-noop")
    wait_for(f"{tasks} no-op queue tasks", lambda: done.count() >= tasks, 300, processes)
    last = done.aggregate(last=Max("stopped"))["last"]
    gaps = []
    for chain in range(chains):
        group = f"queue-hops-{chain}"
        async_task("bench.benchapp.tasks.hop", hops, group, group=group, save=True)
        results = Success.objects.filter(group=group)
        wait_for(
            f"chain {chain} of {hops} queue tasks",
            lambda results=results: results.count() >= hops,
            120,
            processes,
        )
        ran_at = sorted(results.values_list("result", flat=True))
        gaps += [1000 * (later - earlier) for earlier, later in itertools.pairwise(ran_at)]
    return QueueFigures(
        tasks=tasks,
        tasks_per_second=tasks / (last - began).total_seconds(),
        hop=Spread.of(gaps),
    )


def diagnostics(logs: Sequence[Path]) -> dict[str, int]:
    """Counts that explain surprises: lock retries, errors, lost leases, queue failures."""
    from django_q.models import Failure, OrmQ

    from workflows.models import Event

    text = "\n".join(log.read_text(errors="replace") for log in logs if log.exists())
    counts = {
        "log lines 'database is locked'": text.count("database is locked"),
        "log tracebacks": text.count("Traceback (most recent call last)"),
        "lease.lost events": Event.objects.filter(type="lease.lost").count(),
        "lease.expired events": Event.objects.filter(type="lease.expired").count(),
        "run.repaired events": Event.objects.filter(type="run.repaired").count(),
        "django-q2 failed tasks": Failure.objects.count(),
        "django-q2 queue rows left": OrmQ.objects.count(),
    }
    sessions = postgres_sessions()
    if sessions is not None:
        counts["PostgreSQL sessions opened"] = sessions
    return counts


def postgres_sessions() -> int | None:
    """Connections opened to this database so far (PostgreSQL 14+), else ``None``.

    With ``CONN_MAX_AGE = 0`` every process that calls ``close_old_connections`` (django-q2's
    pusher and workers, the sweeper) opens a new connection each time.
    """
    from django.db import connection

    if connection.vendor != "postgresql" or connection.pg_version < 140000:
        return None
    with connection.cursor() as cursor:
        cursor.execute("select sessions from pg_stat_database where datname = current_database()")
        return int(cursor.fetchone()[0])


def ms(delta: timedelta) -> float:
    return delta.total_seconds() * 1000


# -- one database --------------------------------------------------------------------------


def run_one(args: argparse.Namespace) -> Figures:
    database = args.database
    print(f"== {database}: starting (logs, database and processes in a temporary directory)")
    with tempfile.TemporaryDirectory(prefix=f"flowsite-bench-workers-{database}-") as tmp_name:
        tmp = Path(tmp_name)
        with database_url(database, tmp) as url:
            env = bench_env(url, tmp, args.workers[0], args.conn_max_age, args.redis)
            processes = Processes(tmp, env)
            failed = False
            try:
                figures = run_phases(args, processes, env)
            except BenchError:
                failed = True  # keep the logs: they say why
                raise
            finally:
                processes.stop_all()
                _close_connections()
                if args.keep_logs or failed:
                    kept = Path(tempfile.mkdtemp(prefix=f"flowsite-bench-logs-{database}-"))
                    for log in processes.logs():
                        if log.exists():
                            (kept / log.name).write_bytes(log.read_bytes())
                    print(f"  logs kept in {kept}")
            if args.peers:
                print("  peers: measuring (bench/peers.py) ...")
                figures.peers = measure_peers(database, postgres_database)
            elif args.ceilings:
                print("  ceilings: measuring (bench/peers.py) ...")
                figures.peers = measure_ceilings(database)
    return figures


def _close_connections() -> None:
    from django.apps import apps

    if apps.ready:
        from django.db import connections

        connections.close_all()


def run_phases(args: argparse.Namespace, processes: Processes, env: dict[str, str]) -> Figures:
    began = time.monotonic()
    processes.manage("migrate", "migrate", "--no-input", timeout=300)
    setup_django(env)
    figures = Figures(database=args.database, facts=database_facts(args.database), workers=0)
    from django.conf import settings

    from workflows.conf import workflow_settings

    figures.workers = settings.Q_CLUSTER["workers"]
    figures.facts["conn_max_age"] = str(settings.DATABASES["default"].get("CONN_MAX_AGE", 0))
    figures.facts["broker_poll"] = f"{settings.Q_CLUSTER.get('poll', 0.2):g} s"
    figures.facts["timer_poll"] = f"{workflow_settings.TIMER_POLL_INTERVAL.total_seconds():g} s"
    processes.start(f"worker-{figures.workers}", "workflows_worker")
    processes.start("sweeper", "workflows_sweeper")

    warm = warm_up(processes, figures.workers)
    print(f"  cluster ready; warm-up runs done in {warm:.1f}s")

    if args.latency_runs:
        figures.step_gap, figures.pickup, figures.run_duration = measure_latency(
            processes, args.latency_runs
        )
        print(f"  latency: {args.latency_runs} single runs done")

    if len(args.workers) == 1:
        figures.throughput = measure_rounds(processes, args, figures, figures.workers)

    if args.limits:
        figures.limits = measure_limits(processes, args, figures.workers)

    if args.event_notify and args.database == "postgres":
        figures.event_notify = measure_event_notify(processes, args, figures.workers)

    if args.timers:
        print(f"  timers: {args.timers} runs due over the next {args.timer_window:g}s ...")
        figures.timers = measure_timers(processes, args.timers, args.timer_window)

    if args.queue_tasks:
        figures.queue_alone = measure_queue_alone(
            processes, args.queue_tasks, chains=QUEUE_CHAINS, hops=STEPS_PER_RUN
        )
        print(f"  django-q2 alone: {args.queue_tasks} no-op tasks and {QUEUE_CHAINS} chains done")
    if len(args.workers) > 1:
        by_workers = measure_sizes_interleaved(processes, args, figures)
        figures.throughput = by_workers.pop(figures.workers)
        figures.throughput_by_workers = by_workers
    processes.check_alive()
    figures.diagnostics = diagnostics(processes.logs())
    figures.facts["load_after"] = load_average()
    figures.facts["seconds"] = f"{time.monotonic() - began:.0f}"
    return figures


def measure_rounds(
    processes: Processes, args: argparse.Namespace, figures: Figures, workers: int
) -> list[ThroughputRound]:
    """``--rounds`` throughput rounds of ``--runs`` runs with the running cluster."""
    return [measure_round(processes, args, figures, workers, index) for index in range(args.rounds)]


def measure_sizes_interleaved(
    processes: Processes, args: argparse.Namespace, figures: Figures
) -> dict[int, list[ThroughputRound]]:
    """``--rounds`` rounds, each running every cluster size of ``--workers`` in turn (the
    cluster restarted with the next size between), by size.

    Measured one size after the other, the later size ran on a database holding every
    earlier round's runs and minutes later on a shared machine, whose load moved single
    rounds by a third. Interleaved, every size sees the same database size and the same
    stretch of time, so "2 workers / 1 worker" compares the cluster sizes only.
    """
    running = figures.workers
    rounds: dict[int, list[ThroughputRound]] = {workers: [] for workers in args.workers}
    for index in range(args.rounds):
        for workers in args.workers:
            if workers != running:
                processes.stop(f"worker-{running}")
                processes.start(
                    f"worker-{workers}", "workflows_worker", env={"BENCH_WORKERS": str(workers)}
                )
                running = workers
                warm_up(processes, workers, label=f"-round-{index}")
                print(f"  cluster of {workers} workers ready")
            rounds[workers].append(measure_round(processes, args, figures, workers, index))
    return rounds


def measure_round(
    processes: Processes, args: argparse.Namespace, figures: Figures, workers: int, index: int
) -> ThroughputRound:
    """One throughput round of ``--runs`` runs with the running cluster; with
    ``--large-runs``, also a batch of that many runs (stored in
    ``figures.large_by_workers``)."""
    measured = measure_throughput(processes, args.runs, f"{workers}w-{index}")
    print(
        f"  {workers} workers, round {index + 1}: {measured.steps_completed} steps in "
        f"{measured.seconds:.2f}s = {measured.steps_per_second:,.0f} steps/s"
    )
    if args.large_runs:
        large = measure_throughput(processes, args.large_runs, f"{workers}w-{index}-large")
        figures.large_by_workers.setdefault(workers, []).append(large)
        print(
            f"  {workers} workers, round {index + 1}, {args.large_runs} runs: "
            f"{large.steps_per_second:,.0f} steps/s"
        )
    return measured


def measure_limits(
    processes: Processes, args: argparse.Namespace, workers: int
) -> dict[str, list[ThroughputRound]]:
    """``--rounds`` rounds, each the plain chain then every limited one, so that all
    variants see the same database size and machine state; by variant."""
    for workflow in LIMITED_WORKFLOWS.values():
        warm_up(processes, workers, workflow)
    variants = {UNLIMITED: NOOP_WORKFLOW, **LIMITED_WORKFLOWS}
    rounds: dict[str, list[ThroughputRound]] = {variant: [] for variant in variants}
    for index in range(args.rounds):
        for variant, workflow in variants.items():
            label = f"{workers}w-limits-{index}-{workflow}"
            measured = measure_throughput(processes, args.runs, label, workflow)
            rounds[variant].append(measured)
            print(
                f"  limits, round {index + 1}, {variant}: {measured.steps_per_second:,.0f} steps/s"
            )
    return rounds


def set_event_trigger(present: bool) -> None:
    """Create or drop the event table's NOTIFY trigger, with migration 0019's statements."""
    from django.db import connection

    migration = importlib.import_module("workflows.migrations.0019_event_notify_trigger")
    with connection.cursor() as cursor:
        cursor.execute(migration.DROP)
        if present:
            cursor.execute(migration.CREATE)


def measure_event_notify(
    processes: Processes, args: argparse.Namespace, workers: int
) -> dict[str, list[ThroughputRound]]:
    """``--rounds`` rounds, each without then with the NOTIFY trigger; by variant. The
    trigger is left in place, as migrated."""
    rounds: dict[str, list[ThroughputRound]] = {WITHOUT_NOTIFY: [], WITH_NOTIFY: []}
    try:
        for index in range(args.rounds):
            for variant in rounds:
                set_event_trigger(variant == WITH_NOTIFY)
                label = f"{workers}w-notify-{index}-{variant.split()[0]}"
                measured = measure_throughput(processes, args.runs, label)
                rounds[variant].append(measured)
                print(
                    f"  event NOTIFY, round {index + 1}, {variant}: "
                    f"{measured.steps_per_second:,.0f} steps/s"
                )
    finally:
        set_event_trigger(True)
    return rounds


# -- report --------------------------------------------------------------------------------


def report(figures: Figures, args: argparse.Namespace) -> None:
    facts, gap, pickup, duration = (
        figures.facts,
        figures.step_gap,
        figures.pickup,
        figures.run_duration,
    )
    timers, queue = figures.timers, figures.queue_alone
    rounds = figures.throughput
    print()
    print(f"Flowsite with workers (bench/workers.py): {args.database}")
    print(f"  {facts['server']} ({facts['settings']})")
    print(
        f"  Python {facts['python']}, Django {facts['django']}, {os.cpu_count()} CPUs, "
        f"{platform.platform()}"
    )
    print(f"  1-minute load average: {facts['load_before']} before, {facts['load_after']} after")
    print(f"  CONN_MAX_AGE: {facts['conn_max_age']}")
    print(
        f"  processes: workflows_worker ({figures.workers} workers, "
        f"{'Redis' if args.redis else 'ORM'} broker, poll {facts['broker_poll']}) "
        f"+ workflows_sweeper (timer poll {facts['timer_poll']})"
    )
    measured_queue = (
        f"{queue.tasks_per_second:,.0f} tasks/s" if queue else "",
        f"{queue.hop.p50:.0f} / {queue.hop.p99:.0f} per task" if queue else "",
    )
    rows = [
        (
            f"step transitions/s ({args.runs} runs x {STEPS_PER_RUN} no-op steps)",
            f"{figures.steps_per_second:,.0f}",
            measured_queue[0],
            f"~{REFERENCE_TASKS_PER_SECOND} tasks/s",
        ),
        ("  rounds", ", ".join(f"{r.steps_per_second:,.0f}" for r in rounds), "", ""),
        (
            "  steps sent through the queue / completed",
            f"{statistics.median(r.steps_via_queue for r in rounds):g} / "
            f"{args.runs * STEPS_PER_RUN}",
            "",
            "",
        ),
        (
            "  worker processes that ran steps",
            f"{statistics.median(r.worker_processes for r in rounds):g}",
            "",
            "",
        ),
        (
            "  seconds to start the runs (in the window)",
            f"{statistics.median(r.start_seconds for r in rounds):.2f}",
            "",
            "",
        ),
        (
            "  seconds until the queue was empty (after the window)",
            f"{statistics.median(r.drain_seconds for r in rounds):.2f}",
            "",
            "",
        ),
    ]
    if gap and pickup and duration:
        rows += [
            (
                "step-to-step latency p50 / p99 (ms)",
                f"{gap.p50:.1f} / {gap.p99:.1f}",
                measured_queue[1],
                f"~{REFERENCE_CHAINED_STEP_MS} per chained task",
            ),
            ("  queue pickup p50 / p99 (ms)", f"{pickup.p50:.0f} / {pickup.p99:.0f}", "", ""),
            ("  whole run of 10 steps p50 (ms)", f"{duration.p50:.0f}", "", ""),
        ]
    if timers:
        late = timers.lateness
        rows += [
            (
                f"timer lateness p50 / p99 (ms, {late.count} timers)",
                f"{late.p50:.0f} / {late.p99:.0f}",
                "",
                "",
            ),
            ("  max lateness (ms)", f"{late.maximum:.0f}", "", ""),
        ]
        if timers.quiet_lateness is not None:
            quiet = timers.quiet_lateness
            rows.append(
                (
                    f"  p50 / p99 of the {quiet.count} due after the last start",
                    f"{quiet.p50:.0f} / {quiet.p99:.0f}",
                    "",
                    "",
                )
            )
    print_table(("measure", "Flowsite", "django-q2 measured", "django-q2 quoted"), rows)
    print()
    if gap:
        print(
            f"  latency: gaps between consecutive steps' started_at (database clock), "
            f"{gap.count} gaps of {args.latency_runs} single runs; pickup = run created -> "
            "first step started"
        )
    if timers:
        print(
            f"  timers: {args.timers} runs started in {timers.start_seconds:.1f}s, due from "
            f"{timers.lead_seconds:g}s to {args.timer_window:g}s; {timers.created_late} "
            "created after their due time (left out)"
        )
    if queue:
        print(
            f"  django-q2 measured: {queue.tasks} no-op async_task calls to the same cluster "
            f"(first send -> last stopped); {QUEUE_CHAINS} chains of {STEPS_PER_RUN} tasks "
            "each sending the next (gap between handler start times)"
        )
    print("  diagnostics: " + ", ".join(f"{k}: {v}" for k, v in figures.diagnostics.items()))
    print(f"  (over the {facts['seconds']} s of this database's benchmark)")
    report_by_workers(figures, args)
    report_scaling(figures, args)
    report_limits(figures, args)
    report_event_notify(figures, args)
    report_cpu(figures, args)
    if args.peers or args.ceilings:
        report_goals(figures, args)


def print_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Left-aligned first column, right-aligned figures, then a free last column."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    print()
    for row in [headers, tuple("-" * w for w in widths), *rows]:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:-1], widths[1:-1], strict=True)]
        print("  " + "  ".join([*cells, row[-1]]))


def rates_by_workers(figures: Figures) -> dict[int, list[ThroughputRound]]:
    """Every cluster size's throughput rounds, the first size's included."""
    return {figures.workers: figures.throughput, **figures.throughput_by_workers}


def median_of(rounds: Sequence[ThroughputRound]) -> float:
    return statistics.median(r.steps_per_second for r in rounds)


def report_by_workers(figures: Figures, args: argparse.Namespace) -> None:
    """Steps/s for each cluster size (``--workers 1,2,4``) and the larger batch."""
    if len(args.workers) == 1 and not args.large_runs:
        return
    rows = []
    for workers, rounds in sorted(rates_by_workers(figures).items()):
        large = figures.large_by_workers.get(workers, [])
        rows.append(
            (
                f"{workers} workers",
                f"{median_of(rounds):,.0f}",
                f"{median_of(large):,.0f}" if large else "-",
                ", ".join(f"{r.steps_per_second:,.0f}" for r in [*rounds, *large]),
            )
        )
    print()
    print(f"Throughput by cluster size, steps/s (median of {args.rounds} rounds): {args.database}")
    print_table(
        ("cluster", f"{args.runs} runs", f"{args.large_runs or '-'} runs", "rounds (small, large)"),
        rows,
    )


def report_scaling(figures: Figures, args: argparse.Namespace) -> None:
    """Issue #42's "more workers never cost": by cluster size, steps/s beside the best
    size's, CPU per step beside the lowest, and the longest lock wait of any round."""
    by_workers = rates_by_workers(figures)
    if not args.scaling or len(by_workers) < 2:
        return
    rates = {w: median_of(r) for w, r in by_workers.items()}
    per_step = {w: cpu_per_step(r).get("per step") for w, r in by_workers.items()}
    waits = {
        w: [r.lock_waits for r in rounds if r.lock_waits is not None]
        for w, rounds in by_workers.items()
    }
    best, lowest = max(rates.values()), min((v for v in per_step.values() if v), default=None)
    rows = []
    for w in sorted(by_workers):
        longest = max((lw.longest_ms for lw in waits[w]), default=None)
        rows.append(
            (
                f"{w} workers",
                f"{rates[w]:,.0f}",
                f"{rates[w] / best:.2f}",
                f"{per_step[w]:.3f}" if per_step[w] else "-",
                f"{per_step[w] / lowest:.2f}" if per_step[w] and lowest else "-",
                f"{longest:.0f}" if longest is not None else "-",
                str(sum(lw.statements for lw in waits[w])) if waits[w] else "-",
                ", ".join(f"{r.steps_per_second:,.0f}" for r in by_workers[w]),
            )
        )
    broker = "Redis" if args.redis else "ORM (PostgreSQL)"
    print()
    print(
        f"More workers never cost (issue #42), {args.database}, {broker} broker, "
        f"{args.runs} runs x {STEPS_PER_RUN} steps, median of {args.rounds} interleaved rounds"
    )
    print_table(
        (
            "cluster",
            "steps/s",
            "/ best",
            "CPU ms/step",
            "/ lowest",
            "longest lock wait ms",
            "waiting statements",
            "rounds steps/s",
        ),
        rows,
    )
    largest = max(by_workers)
    all_waits = [lw for values in waits.values() for lw in values]
    checks = [
        (
            f"steps/s at {largest} workers / best size >= {SCALING_RATE_GOAL:g}",
            f"{rates[largest] / best:.2f}",
            rates[largest] / best >= SCALING_RATE_GOAL,
        )
    ]
    if all_waits:
        worst = max(all_waits, key=lambda lw: lw.longest_ms)
        checks.append(
            (
                f"longest lock wait <= {SCALING_LOCK_GOAL_MS} ms",
                f"{worst.longest_ms:.0f} ms",
                worst.longest_ms <= SCALING_LOCK_GOAL_MS,
            )
        )
        if worst.longest_query:
            print(f"  longest-waiting statement: {worst.longest_query}")
        locks: dict[str, int] = {}
        for lw in all_waits:
            for event, count in lw.by_lock.items():
                locks[event] = locks.get(event, 0) + count
        print(f"  waiting statements by lock: {locks or 'none'}")
    if lowest:
        highest = max(v for v in per_step.values() if v)
        checks.append(
            (
                f"CPU per step, highest / lowest <= {SCALING_CPU_GOAL:g}",
                f"{highest / lowest:.2f}",
                highest / lowest <= SCALING_CPU_GOAL,
            )
        )
    for label, value, met in checks:
        print(f"  goal: {label}: {value} ({'met' if met else 'NOT met'})")


def report_limits(figures: Figures, args: argparse.Namespace) -> None:
    """Steps/s under each limit beside the plain chain's, from the interleaved rounds."""
    if not figures.limits:
        return
    unlimited = median_of(figures.limits[UNLIMITED])
    rows = []
    for variant, rounds in figures.limits.items():
        rate = median_of(rounds)
        rows.append(
            (
                variant,
                f"{rate:,.0f}",
                f"{rate / unlimited:.2f}",
                f"{statistics.median(r.steps_via_queue for r in rounds):g}",
                f"{sum(r.held for r in rounds)}",
                ", ".join(f"{r.steps_per_second:,.0f}" for r in rounds),
            )
        )
    print()
    print(
        f"Cost of limits, steps/s (median of {args.rounds} interleaved rounds of {args.runs} "
        f"runs x {STEPS_PER_RUN} steps, {figures.workers} workers): {args.database}"
    )
    print_table(
        ("variant", "steps/s", "/ unlimited", "via queue", "held", "rounds"),
        rows,
    )
    print(
        f"  via queue: steps sent through the queue of {args.runs * STEPS_PER_RUN} (the "
        "rest were chained); held: step.held events over all rounds (0: no limit bound)"
    )


def report_event_notify(figures: Figures, args: argparse.Namespace) -> None:
    """Steps/s with the event table's NOTIFY trigger beside without, interleaved rounds."""
    if not figures.event_notify:
        return
    baseline = median_of(figures.event_notify[WITHOUT_NOTIFY])
    print()
    print(
        f"Cost of the event NOTIFY trigger, steps/s (median of {args.rounds} interleaved "
        f"rounds of {args.runs} runs x {STEPS_PER_RUN} steps, {figures.workers} workers)"
    )
    print_table(
        ("variant", "steps/s", "/ without", "rounds"),
        [
            (
                variant,
                f"{median_of(rounds):,.0f}",
                f"{median_of(rounds) / baseline:.3f}",
                ", ".join(f"{r.steps_per_second:,.0f}" for r in rounds),
            )
            for variant, rounds in figures.event_notify.items()
        ],
    )
    paired = statistics.median(
        with_.steps_per_second / without.steps_per_second
        for without, with_ in zip(
            figures.event_notify[WITHOUT_NOTIFY], figures.event_notify[WITH_NOTIFY], strict=True
        )
    )
    print(f"  median of the rounds' own ratios (with / without, same round): {paired:.3f}")


def report_goals(figures: Figures, args: argparse.Namespace) -> None:
    """The peers measured after the cluster stopped, and each goal's ratio beside them."""
    by_workers = rates_by_workers(figures)
    two = by_workers.get(2)
    print()
    print(f"Peers, measured in this invocation after the cluster stopped: {args.database}")
    for peer in figures.peers:
        value = (
            f"{peer.value:,.{peer.decimals}f}"
            if peer.value is not None
            else f"missing ({peer.error})"
        )
        print(f"  {peer.what}: {value}")
    if two is None:
        print("  (the goals compare 2 workers: add 2 to --workers for their ratios)")
        return
    flowsite = median_of(two)
    peers = {peer.name: peer.value for peer in figures.peers}
    rows = []
    if args.database == "sqlite":
        targets = [
            ("2 workers / inline", peers.get("inline"), 0.8),
            (
                "2 workers / inline, starts included (no goal)",
                peers.get("inline with starts"),
                None,
            ),
            ("2 workers / django-q2 alone (peer script)", peers.get("django-q2 peer"), 3.0),
            (
                "2 workers / django-q2 alone (this cluster)",
                figures.queue_alone.tasks_per_second if figures.queue_alone else None,
                3.0,
            ),
            ("2 workers / ORM ceiling (no goal)", peers.get("ORM ceiling"), None),
            ("2 workers / DBOS on SQLite (no goal)", peers.get("DBOS"), None),
        ]
        report_sqlite_second_worker(by_workers, peers.get("inline with starts"))
    else:
        report_postgres_ceilings(figures, peers)
        if not args.peers:  # --ceilings alone measures no DBOS
            return
        targets = [("2 workers / DBOS on PostgreSQL", peers.get("DBOS"), 3.0)]
    for label, peer_value, goal in targets:
        ratio = f"{flowsite / peer_value:.2f}" if peer_value else "-"
        rows.append(
            (
                label,
                f"{flowsite:,.0f}",
                f"{peer_value:,.0f}" if peer_value else "-",
                ratio,
                f">= {goal:g}" if goal else "",
            )
        )
    print_table(("goal", "Flowsite steps/s", "peer", "ratio", "goal"), rows)
    inline, with_starts = peers.get("inline"), peers.get("inline with starts")
    if args.database == "sqlite" and inline and with_starts:
        # The workers' window holds the starts too, and on SQLite every writer shares one
        # lock: no cluster can beat one process doing the same writes back to back.
        print(
            "  ceiling of '2 workers / inline' with one write lock (inline with starts / "
            f"inline, before any queue or worker cost): {with_starts / inline:.2f}"
        )
    if args.database == "postgres" and len(by_workers) > 1:
        growth = ", ".join(f"{w}: {median_of(r):,.0f}" for w, r in sorted(by_workers.items()))
        print(f"  steps/s by workers on PostgreSQL (goal: grows with workers): {growth}")


def report_sqlite_second_worker(
    by_workers: dict[int, list[ThroughputRound]], with_starts: float | None
) -> None:
    """Issue #26 goal 2 on SQLite: a second worker never lowers throughput, and the
    better cluster keeps up with one process writing the same rows back to back."""
    one, two = by_workers.get(1), by_workers.get(2)
    if one is None or two is None:
        print("  (issue #26 goal 2 compares 1 and 2 workers: run --workers 1,2)")
        return
    one_rate, two_rate = median_of(one), median_of(two)
    better = max(one_rate, two_rate)
    rows = [("2 workers / 1 worker", f"{two_rate:,.0f}", f"{one_rate:,.0f}", two_rate / one_rate)]
    if with_starts:
        rows.append(
            (
                "better of 1 and 2 workers / inline with starts",
                f"{better:,.0f}",
                f"{with_starts:,.0f}",
                better / with_starts,
            )
        )
    print()
    print("Issue #26 goal 2 (SQLite: a second worker never lowers throughput)")
    print_table(
        ("goal", "steps/s", "ceiling", "ratio", "goal"),
        [
            (label, rate, ceiling, f"{ratio:.2f}", f">= {goal:g}")
            for (label, rate, ceiling, ratio), goal in zip(rows, (0.95, 0.9), strict=False)
        ],
    )


def cpu_rounds(figures: Figures, workers: int) -> list[ThroughputRound]:
    """The rounds CPU per step is quoted from: the larger batch when there is one (the
    cluster's own cost dominates it), else the regular rounds."""
    return figures.large_by_workers.get(workers) or rates_by_workers(figures).get(workers, [])


def cpu_per_step(rounds: Sequence[ThroughputRound]) -> dict[str, float]:
    """Median over ``rounds`` of each role's CPU ms per step (``bench/cpu.py``)."""
    shares = [cpu.per_step_ms(r.cpu, r.steps_completed) for r in rounds if r.cpu]
    return {key: statistics.median(s[key] for s in shares) for key in shares[0]} if shares else {}


def report_cpu(figures: Figures, args: argparse.Namespace) -> None:
    """CPU ms per completed step by process role, for each cluster size (from ``/proc``,
    from before the starts until the queue was empty)."""
    sizes = sorted(rates_by_workers(figures))
    columns = {w: cpu_per_step(cpu_rounds(figures, w)) for w in sizes}
    if not any(columns.values()):
        return
    runs = args.large_runs or args.runs
    print()
    print(f"CPU ms per completed step by process ({runs} runs, median of rounds): {args.database}")
    keys = [*cpu.ROLES, "per step"]
    labels = {"per step": "per step: the steps' processes (all but the script's)"}
    rows = [
        (labels.get(key, key), *(f"{columns[w].get(key, 0.0):.3f}" for w in sizes), "")
        for key in keys
    ]
    print_table(("process", *(f"{w} workers" for w in sizes), ""), rows)


def report_postgres_ceilings(figures: Figures, peers: dict[str, float | None]) -> None:
    """Issue #26 goal 1 beside ``pg_limit``'s ``django_2proc`` of this invocation: 2 workers'
    steps/s (the larger batch when there is one) ÷ its tx/s, and CPU per step ÷ its CPU
    per transaction."""
    rounds = cpu_rounds(figures, 2)
    rate, ceiling = median_of(rounds), peers.get("PG ORM ceiling")
    step_ms, ceiling_ms = cpu_per_step(rounds).get("per step"), peers.get("PG ORM ceiling CPU")
    print()
    print("Issue #26 goal 1, PostgreSQL, against pg_limit's django_2proc (same invocation):")
    rows = [
        (
            "2 workers steps/s / ORM ceiling tx/s",
            f"{rate:,.0f}",
            f"{ceiling:,.0f}" if ceiling else "-",
            f"{rate / ceiling:.2f}" if ceiling else "-",
            ">= 0.8",
        ),
        (
            "CPU ms per step / ORM ceiling CPU ms per tx",
            f"{step_ms:.3f}" if step_ms else "-",
            f"{ceiling_ms:.3f}" if ceiling_ms else "-",
            f"{step_ms / ceiling_ms:.2f}" if step_ms and ceiling_ms else "-",
            "<= 1.0",
        ),
    ]
    print_table(("goal", "Flowsite", "ceiling", "ratio", "goal"), rows)


def summary(results: dict[str, dict[str, Any]]) -> None:
    """One table side by side when both databases ran."""

    def queue(res: dict[str, Any], fmt: Callable[[dict[str, Any]], str]) -> str:
        return fmt(res["queue_alone"]) if res.get("queue_alone") else "-"

    def measured(res: dict[str, Any], key: str, fmt: Callable[[dict[str, Any]], str]) -> str:
        return fmt(res[key]) if res.get(key) else "-"

    databases = list(results)
    header = ["measure", *databases, *(f"django-q2 on {db}" for db in databases), "quoted"]
    rows = [
        [
            "step transitions/s (queue: tasks/s)",
            *(f"{median_rate(res):,.0f}" for res in results.values()),
            *(queue(res, lambda q: f"{q['tasks_per_second']:,.0f}") for res in results.values()),
            f"~{REFERENCE_TASKS_PER_SECOND}",
        ],
        [
            "step-to-step p50 / p99 ms",
            *(
                measured(res, "step_gap", lambda gap: f"{gap['p50']:.1f} / {gap['p99']:.1f}")
                for res in results.values()
            ),
            *(
                queue(res, lambda q: f"{q['hop']['p50']:.0f} / {q['hop']['p99']:.0f}")
                for res in results.values()
            ),
            f"~{REFERENCE_CHAINED_STEP_MS}",
        ],
        [
            "timer lateness p50 / p99 ms",
            *(
                measured(
                    res,
                    "timers",
                    lambda t: f"{t['lateness']['p50']:.0f} / {t['lateness']['p99']:.0f}",
                )
                for res in results.values()
            ),
            *("" for _ in databases),
            "",
        ],
    ]
    for variant in LIMITED_WORKFLOWS:
        rows.append(
            [
                f"steps/s under a {variant} (/ unlimited)",
                *(limited_rate(res, variant) for res in results.values()),
                *("" for _ in databases),
                "",
            ]
        )
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print()
    print("Summary (medians of this invocation)")
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  " + "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)))


def median_rate(result: dict[str, Any]) -> float:
    return statistics.median(r["steps_per_second"] for r in result["throughput"])


def limited_rate(result: dict[str, Any], variant: str) -> str:
    """``--limits``: a limited variant's median steps/s and its ratio to the plain chain's."""
    if not result.get("limits"):
        return "-"

    def rate(rounds: list[dict[str, Any]]) -> float:
        return statistics.median(r["steps_completed"] / r["seconds"] for r in rounds)

    limited, unlimited = rate(result["limits"][variant]), rate(result["limits"][UNLIMITED])
    return f"{limited:,.0f} ({limited / unlimited:.2f})"


def as_json(figures: Figures) -> dict[str, Any]:
    data = asdict(figures)
    for measured, round_data in zip(figures.throughput, data["throughput"], strict=True):
        round_data["steps_per_second"] = measured.steps_per_second
    return data


# -- entry point ---------------------------------------------------------------------------


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(f"signal {signum}")


def child_argv(args: argparse.Namespace, database: str, results_file: Path) -> list[str]:
    """The command line that runs one database with the same options."""
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        f"--database={database}",
        f"--workers={','.join(map(str, args.workers))}",
        f"--large-runs={args.large_runs}",
        *(["--peers"] if args.peers else []),
        *(["--ceilings"] if args.ceilings else []),
        *(["--limits"] if args.limits else []),
        *(["--event-notify"] if args.event_notify else []),
        *(["--scaling"] if args.scaling else []),
        f"--runs={args.runs}",
        f"--rounds={args.rounds}",
        f"--latency-runs={args.latency_runs}",
        f"--timers={args.timers}",
        f"--timer-window={args.timer_window}",
        f"--queue-tasks={args.queue_tasks}",
        *([f"--conn-max-age={args.conn_max_age}"] if args.conn_max_age is not None else []),
        *([f"--redis={args.redis}"] if args.redis is not None else []),
        f"--results-file={results_file}",
    ]
    return [*argv, "--keep-logs"] if args.keep_logs else argv


def run_both(args: argparse.Namespace) -> int:
    """Run each database in a child process of its own (Django is set up once per process)."""
    results: dict[str, dict[str, Any]] = {}
    status = 0
    with tempfile.TemporaryDirectory(prefix="flowsite-bench-workers-") as tmp:
        for database in ("sqlite", "postgres"):
            results_file = Path(tmp) / f"{database}.json"
            child = subprocess.Popen(child_argv(args, database, results_file), cwd=REPO_ROOT)
            try:
                returncode = child.wait()
            except (KeyboardInterrupt, Interrupted) as exc:
                # A terminal's Ctrl-C reaches the child too (same process group); a signal
                # sent to this process alone does not. The child stops its own processes,
                # ignoring further signals while it does.
                if isinstance(exc, KeyboardInterrupt):
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        child.wait(timeout=2)
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
                child.wait(timeout=STOP_GRACE_SECONDS + 30)
                raise
            if returncode != 0:
                status = returncode
            elif results_file.exists():
                results[database] = json.loads(results_file.read_text())
    if len(results) > 1:
        summary(results)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_interrupted)
    # Also when started from a shell that ignores SIGINT for background jobs.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if args.database == "both":
            return run_both(args)
        figures = run_one(args)
    except BenchError as exc:
        print(f"FAILED ({args.database}): {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Interrupted):
        print(f"interrupted ({args.database}); every started process was stopped", file=sys.stderr)
        return 130
    report(figures, args)
    if args.results_file is not None:
        args.results_file.write_text(json.dumps(as_json(figures), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
