"""`make run` stops completely, and promptly, on Ctrl-C and on SIGTERM.

The demo is started the way a developer starts it: `make run` in its own session (as a
terminal's foreground job), with its own port and ``FLOWSITE_VAR_DIR`` so that it uses its
own SQLite file. Once the admin answers, every process below make is recorded by process
id and start time (so a recycled pid is not mistaken for a survivor). Then the signal is
sent and every recorded process, and anything else left in make's session, must be gone
within ``STOP_BOUND`` seconds: a leftover cluster keeps the SQLite file open and
keeps working on it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.acceptance

REPO = Path(__file__).resolve().parents[2]
# Relative to REPO, as the Makefile names it: `make -o` must see the same target name.
STAMP = ".venv/.installed-stamp"
STARTUP_TIMEOUT = 120.0
STOP_BOUND = 10.0
# django-q2 logs this once its sentinel has started the workers, pusher and monitor.
CLUSTER_RUNNING = re.compile(r"Q Cluster .+ running\.")
# A developer's http_proxy must not see the request to the local site.
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Variables that would point `make run` at another database, broker, settings module or
# make's jobserver of an outer `make test`.
_NOT_INHERITED = (
    "DATABASE_URL",
    "DJANGO_SETTINGS_MODULE",
    "FLOWSITE_REDIS_URL",
    "FLOWSITE_EXECUTOR",
    "FLOWSITE_WORKERS",
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
)


@dataclass(frozen=True)
class Proc:
    """A process as it was recorded; ``start_time`` (clock ticks since boot) tells it
    apart from a later process that reuses its pid."""

    pid: int
    ppid: int
    session: int
    state: str
    start_time: int

    @property
    def command(self) -> str:
        try:
            raw = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return "?"
        return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def read_proc(pid: int) -> Proc | None:
    """The process ``pid`` now, or ``None`` once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may hold spaces: split after the last ")".
    fields = raw.rsplit(")", 1)[1].split()
    return Proc(pid, int(fields[1]), int(fields[3]), fields[0], int(fields[19]))


def all_procs() -> list[Proc]:
    found = (
        read_proc(int(entry.name)) for entry in Path("/proc").iterdir() if entry.name.isdigit()
    )
    return [proc for proc in found if proc is not None]


def alive(recorded: Proc) -> bool:
    """Still running: same pid and start time, and not a zombie (an orphaned zombie has
    exited; only a container init that does not reap keeps it listed)."""
    now = read_proc(recorded.pid)
    return now is not None and now.start_time == recorded.start_time and now.state not in "ZX"


def descendants(root: int) -> list[Proc]:
    """Every live process below ``root``, found by walking parent pids."""
    procs = [proc for proc in all_procs() if proc.state not in "ZX"]
    found: list[Proc] = []
    parents = {root}
    while True:
        children = [proc for proc in procs if proc.ppid in parents and proc not in found]
        if not children:
            return found
        found.extend(children)
        parents = {proc.pid for proc in children}


def survivors(recorded: list[Proc], session: int) -> list[Proc]:
    """Recorded processes still alive, plus anything else alive in the demo's session
    (a process that started after the recording, or an orphan re-parented elsewhere)."""
    left = {proc.pid: proc for proc in recorded if alive(proc)}
    for proc in all_procs():
        if proc.session == session and proc.state not in "ZX":
            left.setdefault(proc.pid, proc)
    return sorted(left.values(), key=lambda proc: proc.pid)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class MakeRun:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def wait_until_serving(self) -> None:
        """Bounded wait for the admin login page and for the cluster to say it runs."""
        url = f"http://127.0.0.1:{self.port}/admin/login/"
        deadline = time.monotonic() + STARTUP_TIMEOUT
        serving = False
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"make run exited with {self.process.returncode}:\n{self.log_tail()}")
            if not serving:
                try:
                    with NO_PROXY.open(url, timeout=2) as response:
                        serving = response.status == 200
                except (urllib.error.URLError, OSError):
                    pass
            # The cluster forks its sentinel, workers, pusher and monitor after the site
            # may already answer: record the processes once they all exist.
            if serving and CLUSTER_RUNNING.search(self.log.read_text(errors="replace")):
                return
            time.sleep(0.2)
        pytest.fail(f"make run did not serve {url} within {STARTUP_TIMEOUT} s:\n{self.log_tail()}")

    def stop_time(self, recorded: list[Proc]) -> tuple[float, list[Proc]]:
        """Seconds until every recorded process is gone, and what is left at the bound."""
        started = time.monotonic()
        while True:
            left = survivors(recorded, self.process.pid)
            elapsed = time.monotonic() - started
            if not left or elapsed > STOP_BOUND:
                return elapsed, left
            time.sleep(0.05)


@contextlib.contextmanager
def started_make_run(tmp_path: Path, port: int) -> Iterator[MakeRun]:
    """`make run` on ``port``; on the way out, SIGKILL whatever it left running."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    if not (REPO / STAMP).exists():
        pytest.skip("the virtualenv is not installed (no .venv/.installed-stamp)")
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in _NOT_INHERITED}
    env.update(PORT=str(port), FLOWSITE_VAR_DIR=str(var_dir), PYTHONUNBUFFERED="1")
    log = tmp_path / "make-run.log"
    with log.open("wb") as output:
        # `-o STAMP`: never reinstall, even if requirements.txt changed since the install.
        # A new session makes make the leader of its own foreground process group, as a
        # terminal's job is. `env --default-signal=INT`: a terminal's make handles SIGINT,
        # but one started by a test run that is itself a background job (CI's, a
        # `make test &`) inherits SIGINT ignored, and make keeps an ignored SIGINT ignored.
        process = subprocess.Popen(
            [
                "env",
                "--default-signal=INT",
                "make",
                "--no-print-directory",
                "-o",
                STAMP,
                "run",
                f"PORT={port}",
            ],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    run = MakeRun(process, port, log)
    try:
        yield run
    finally:
        # Whatever the test left running: everything in make's session, whatever its
        # process group. The processes were started by this fixture, so SIGKILL is fine.
        for proc in survivors(descendants(process.pid), process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture
def make_run(tmp_path: Path) -> Iterator[MakeRun]:
    with started_make_run(tmp_path, free_port()) as run:
        yield run


def stop_and_measure(make_run: MakeRun, signum: signal.Signals, *, group: bool) -> float:
    """Send ``signum`` to make's process group (a terminal's Ctrl-C reaches every process
    of the foreground group) or to make alone (a process manager's ``kill -INT PID``),
    and return how long every process took to go."""
    make_run.wait_until_serving()
    recorded = descendants(make_run.process.pid)
    commands = " ".join(proc.command for proc in recorded)
    for expected in ("workflows_worker", "workflows_sweeper", "runserver"):
        assert expected in commands, f"no {expected} among {commands}"

    send = f"{signum.name} to {'the group' if group else 'make alone'}"
    if group:
        os.killpg(make_run.process.pid, signum)
    else:
        os.kill(make_run.process.pid, signum)
    elapsed, left = make_run.stop_time(recorded)

    assert not left, (
        f"{send}: still running after {STOP_BOUND} s:\n"
        + "\n".join(f"  {proc.pid} (ppid {proc.ppid}) {proc.command}" for proc in left)
        + f"\n--- make run output ---\n{make_run.log_tail()}"
    )
    make_run.process.wait(timeout=5)
    print(f"{send}: {len(recorded)} processes gone in {elapsed:.2f} s")
    return elapsed


def test_ctrl_c_stops_site_cluster_and_sweeper_within_bound(make_run):
    assert stop_and_measure(make_run, signal.SIGINT, group=True) <= STOP_BOUND


def test_sigint_to_make_alone_stops_site_cluster_and_sweeper_within_bound(make_run):
    """make passes SIGTERM on to its recipe but not SIGINT: it waits for the recipe to
    end on its own, which took the site down only once someone killed it."""
    assert stop_and_measure(make_run, signal.SIGINT, group=False) <= STOP_BOUND
    assert make_run.process.returncode == -signal.SIGINT  # make dies of it, as it should


def test_sigterm_to_make_stops_site_cluster_and_sweeper_within_bound(make_run):
    assert stop_and_measure(make_run, signal.SIGTERM, group=False) <= STOP_BOUND


def test_a_process_that_exits_on_its_own_stops_the_others(tmp_path):
    """runserver cannot bind a port that is taken: the cluster and the sweeper must not
    go on without it, and `make run` must fail."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with started_make_run(tmp_path, taken.getsockname()[1]) as run:
            try:
                status = run.process.wait(timeout=STARTUP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pytest.fail(f"make run did not exit without its web server:\n{run.log_tail()}")
            left = survivors([], run.process.pid)

    assert status != 0, run.log_tail()
    assert not left, "\n".join(f"  {proc.pid} {proc.command}" for proc in left)
    assert "demo_run: runserver exited with status 1: stopping the others" in run.log_tail()


# A child whose whole process group ignores the stop signals: a shell and two sleeps.
STUBBORN = "trap '' INT TERM; sleep 300 & sleep 300 & wait"
SUPERVISE_STUBBORN = (
    "import sys\n"
    "from flowsite.demo.supervisor import Child, supervise\n"
    f"sys.exit(supervise([Child('stubborn', ['sh', '-c', {STUBBORN!r}])], 1.0, print))\n"
)


@dataclass(frozen=True)
class Stopped:
    """How a process given a stop signal ended: its pid, exit status and output, how long
    it took, and which of the processes it had started were still alive then."""

    pid: int
    returncode: int
    output: bytes
    elapsed: float
    left: list[Proc]


def start_then_signal(argv: list[str], processes: int, signum: signal.Signals) -> Stopped:
    """Run ``argv`` in a session of its own until ``processes`` processes run below it,
    send ``signum`` to it alone and wait up to ``STOP_BOUND`` for it to exit. Whatever is
    left in its session is SIGKILLed on the way out."""
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        recorded = descendants(process.pid)
        while len(recorded) < processes and time.monotonic() < deadline:
            time.sleep(0.05)
            recorded = descendants(process.pid)
        assert len(recorded) == processes, [proc.command for proc in recorded]

        started = time.monotonic()
        process.send_signal(signum)
        output, _ = process.communicate(timeout=STOP_BOUND)
        elapsed = time.monotonic() - started
        left = [proc for proc in recorded if alive(proc)]
    finally:
        for proc in survivors([], process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)
    return Stopped(process.pid, process.returncode, output, elapsed, left)


def test_supervisor_kills_the_whole_group_of_a_child_that_ignores_the_signal():
    """The escalation `make run` never needs when its processes behave: after the grace
    period, SIGKILL reaches the child and every process it started."""
    stopped = start_then_signal([sys.executable, "-c", SUPERVISE_STUBBORN], 3, signal.SIGTERM)

    assert not stopped.left, [proc.command for proc in stopped.left]
    assert stopped.returncode == 0
    assert b"stubborn still running: sending SIGKILL" in stopped.output
    assert 1.0 <= stopped.elapsed < STOP_BOUND


# A parent that takes SIGINT as make does: back to the default action, wait for the
# child, then die of the signal. It passes nothing on to the supervisor.
LIKE_MAKE = (
    "import os, signal, subprocess, sys\n"
    "child = subprocess.Popen([sys.executable, '-c', sys.argv[1]])\n"
    "def on_int(signum, frame):\n"
    "    signal.signal(signum, signal.SIG_DFL)\n"
    "    os.waitpid(child.pid, 0)\n"
    "    os.kill(os.getpid(), signum)\n"
    "signal.signal(signal.SIGINT, on_int)\n"
    "os.waitpid(child.pid, 0)\n"
)
SUPERVISE_SLEEPER = (
    "import sys\n"
    "from flowsite.demo.supervisor import Child, supervise\n"
    "sys.exit(supervise([Child('sleeper', ['sleep', '300'])], 1.0, print))\n"
)


def test_supervisor_stops_when_its_parent_takes_a_sigint_it_does_not_pass_on():
    """Without make: the supervisor reads the signal off its parent's handlers."""
    argv = [sys.executable, "-c", LIKE_MAKE, SUPERVISE_SLEEPER]
    stopped = start_then_signal(argv, 2, signal.SIGINT)

    assert not stopped.left, [proc.command for proc in stopped.left]
    assert stopped.returncode == -signal.SIGINT
    assert f"parent process {stopped.pid} got SIGINT".encode() in stopped.output
    assert stopped.elapsed < STOP_BOUND
