"""Wake-ups on commit, measured: from a commit in another process to a hook's delivery,
a webhook's send and a long poll's return.

For each database (a fresh temporary SQLite file, and/or a database of its own on the
PostgreSQL server at 127.0.0.1:5432), this process runs a sweeper in a thread
(``sweep_forever``, delivering hooks and sending webhooks, as ``workflows_sweeper`` does),
a webhook receiver (a local HTTP server) and, per sample, a long poll
(``workflows.wait_for(run, 60)``) in a thread. A child process (this script with
``--committer``) commits the transitions: per sample, this process starts a run that
waits at a gate, makes the long poll wait on it, and asks the child to cancel the run;
the child answers with the wall-clock time right after its commit. The figures are, per
sample, the wall-clock times at which this process saw the ``run_finished`` hook, the
``run.cancelled`` webhook and the long poll's return, minus that commit time (p50, p99).
Samples start after a random pause, so that they do not line up with a poll.

Two modes, one after the other in the same process:

* **polling** (before): every watch's ``wait`` only sleeps, as the code did before
  wake-ups: the sweeper polls every ``TIMER_POLL_INTERVAL`` (200 ms), webhooks recorded by
  the hook deliverer wait for the next recovery pass (``RECOVERY_INTERVAL``, 5 s) and the
  long poll reads every 200 ms (a client polling at the sweeper's pace);
* **wake-ups** (after): as shipped: ``NOTIFY`` and the listener on PostgreSQL; on SQLite
  nothing crosses processes, so waiters find another process's commit at their backstop
  read (the sweeper's poll, the long poll's 200 ms).

Prints figures, asserts nothing about time. Exits non-zero when a sample is not seen
within its bounded wait.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from unittest import mock

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workers import BenchError, Spread, postgres_database

DATABASE = "flowsite_bench_wakeups"
SETTINGS_MODULE = "flowsite.settings"
# Longest wait for what a sample awaits (seconds): a sample not seen by then fails the run.
SAMPLE_BOUND = 30.0
# The pause before a sample, drawn from [0, PAUSE) seconds, and the poll of "polling" mode.
PAUSE = 0.25
POLL = 0.2
WAITED = ("hook", "webhook", "long poll")


class Seen:
    """Wall-clock times at which this process saw each waited thing of each run."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._times: dict[tuple[str, str], float] = {}

    def note(self, what: str, run_id: str) -> None:
        with self._lock:
            self._times.setdefault((what, run_id), time.time())
            self._lock.notify_all()

    def all_of(self, run_id: str) -> dict[str, float]:
        """The times of every waited thing of ``run_id``, waiting for them (bounded)."""
        give_up_at = time.monotonic() + SAMPLE_BOUND
        with self._lock:
            while not all((what, run_id) in self._times for what in WAITED):
                left = give_up_at - time.monotonic()
                if left <= 0:
                    missing = [what for what in WAITED if (what, run_id) not in self._times]
                    raise BenchError(f"run {run_id}: {', '.join(missing)} not seen")
                self._lock.wait(left)
            return {what: self._times[(what, run_id)] for what in WAITED}


@contextmanager
def webhook_receiver(seen: Seen) -> Iterator[str]:
    """A local endpoint noting when each run's webhook arrived; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            seen.note("webhook", body["data"]["run_id"])
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def polling_only() -> Iterator[None]:
    """Every watch only sleeps (at most :data:`POLL` at a time) and is never woken."""
    from workflows.engine.wakeups.local import LocalWatch
    from workflows.queries import long_poll

    def sleep_only(self: Any, timeout: float) -> bool:
        time.sleep(min(timeout, POLL))
        return False

    with (
        mock.patch.object(LocalWatch, "wait", sleep_only),
        mock.patch.object(long_poll, "BACKSTOP_POSTGRESQL", POLL),
        mock.patch.object(long_poll, "BACKSTOP_SQLITE", POLL),
    ):
        yield


def held_workflow() -> Any:
    from workflows import Gate, Workflow

    class Held(Workflow):
        name = "bench_wakeups_held"
        review = Gate(prompt="go?")

    return Held


def long_poll_in_thread(run_id: str, seen: Seen) -> None:
    from django.db import connections

    import workflows

    def wait() -> None:
        try:
            workflows.wait_for(run_id, 60)
            seen.note("long poll", run_id)
        finally:
            connections.close_all()

    threading.Thread(target=wait, daemon=True).start()
    from workflows.engine.wakeups.local import watchers

    give_up_at = time.monotonic() + SAMPLE_BOUND
    while not watchers(f"run:{run_id}"):
        if time.monotonic() > give_up_at:
            raise BenchError(f"run {run_id}: the long poll did not start")
        time.sleep(0.001)


def measure(samples: int, committer: subprocess.Popen[str], seen: Seen) -> dict[str, Spread]:
    """``samples`` runs started here and cancelled by the committer; delays by waited thing."""
    import workflows
    from workflows import hooks

    assert committer.stdin is not None and committer.stdout is not None
    held = held_workflow()
    delays: dict[str, list[float]] = {what: [] for what in WAITED}

    def finished(sender: Any, run_id: Any, **arguments: Any) -> None:
        seen.note("hook", str(run_id))

    hooks.run_finished.connect(finished, weak=False)
    try:
        for _ in range(samples):
            run_id = str(workflows.start_run(held).pk)
            long_poll_in_thread(run_id, seen)
            time.sleep(random.uniform(0, PAUSE))
            committer.stdin.write(run_id + "\n")
            committer.stdin.flush()
            committed_at = float(committer.stdout.readline())
            for what, at in seen.all_of(run_id).items():
                delays[what].append((at - committed_at) * 1000)
    finally:
        hooks.run_finished.disconnect(finished)
    return {what: Spread.of(values) for what, values in delays.items()}


def run_database(database: str, samples: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix=f"flowsite-bench-wakeups-{database}-") as tmp,
        database_url(database, Path(tmp)) as url,
    ):
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
            "DATABASE_URL": url,
            "FLOWSITE_VAR_DIR": tmp,
            "FLOWSITE_EXECUTOR": "inline",
            "DJANGO_DEBUG": "0",
            "PYTHONUNBUFFERED": "1",
        }
        os.environ.update(env)
        import django
        from django.core.management import call_command

        django.setup()
        logging.getLogger("workflows").setLevel(logging.WARNING)  # the sweeper's passes
        call_command("migrate", verbosity=0)
        report(database, samples, measure_modes(samples, env))


def measure_modes(samples: int, env: dict[str, str]) -> dict[str, dict[str, Spread]]:
    from workflows.engine.wakeups.postgresql import stop_listeners
    from workflows.testing import sweeper_running
    from workflows.webhooks import services

    seen = Seen()
    figures: dict[str, dict[str, Spread]] = {}
    committer = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--committer"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        with webhook_receiver(seen) as url:
            services.create_endpoint(url=url, event_types=["run.cancelled"])
            for mode, patched in (("polling", polling_only), ("wake-ups", no_patch)):
                with patched(), sweeper_running():
                    figures[mode] = measure(samples, committer, seen)
                print(f"  {mode}: {samples} samples done")
    finally:
        assert committer.stdin is not None
        committer.stdin.close()
        committer.wait(timeout=SAMPLE_BOUND)
        stop_listeners()  # before the database is dropped
    return figures


@contextmanager
def no_patch() -> Iterator[None]:
    yield


@contextmanager
def database_url(database: str, tmp: Path) -> Iterator[str]:
    if database == "postgres":
        with postgres_database(DATABASE) as url:
            yield url
    else:
        yield f"sqlite:///{tmp / 'bench.sqlite3'}"


def report(database: str, samples: int, figures: dict[str, dict[str, Spread]]) -> None:
    print()
    print(f"Delay from a commit in another process, ms ({samples} samples): {database}")
    print(f"  {'':10} {'':9} {'p50':>8} {'p99':>8} {'max':>8}")
    for what in WAITED:
        for mode, spreads in figures.items():
            spread = spreads[what]
            print(f"  {what:10} {mode:9} {spread.p50:8.1f} {spread.p99:8.1f} {spread.maximum:8.1f}")


def commit_cancellations(stdin: Any = sys.stdin, stdout: Any = sys.stdout) -> None:
    """The committer: cancel each run id read, print the time right after the commit."""
    import django

    django.setup()
    import workflows

    held_workflow()
    for line in stdin:
        workflows.cancel_run(line.strip())
        print(f"{time.time():.6f}", file=stdout, flush=True)


def for_each_database(samples: int) -> int:
    """SQLite, then PostgreSQL, each in a child process of its own (Django is set up
    once per process)."""
    status = 0
    for database in ("sqlite", "postgres"):
        script = str(Path(__file__).resolve())
        argv = [sys.executable, script, f"--database={database}", f"--samples={samples}"]
        status = status or subprocess.run(argv).returncode
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--samples", type=int, default=100, help="samples per mode (100)")
    parser.add_argument("--committer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.committer:
        commit_cancellations()
        return 0
    if args.database == "both":
        return for_each_database(args.samples)
    try:
        run_database(args.database, args.samples)
    except BenchError as exc:
        print(f"bench/wakeups.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
