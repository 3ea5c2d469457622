"""Real processes for the acceptance tests: start them, find them, signal them, clean up.

Every process is started in a session of its own (``start_new_session=True``), so its
process group id is its pid and every descendant keeps that group: django-q2's
sentinel, pusher, monitor and workers, even once a killed parent has orphaned them.
Stopping a process therefore signals its whole group, then checks ``/proc`` until no
member of the session is left.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from django.conf import settings
from django.test import override_settings

T = TypeVar("T")

MANAGE = Path(settings.BASE_DIR) / "manage.py"
SUBPROCESS_SETTINGS = "tests.acceptance.settings"
STOP_GRACE_SECONDS = 5.0
COMMAND_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` that tell who a process belongs to."""

    pid: int
    state: str
    ppid: int
    session: int


def proc_stat(pid: int) -> ProcStat | None:
    """Read a process's state, parent and session; ``None`` once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may contain spaces: split after the last ")".
    state, ppid, _pgrp, session = raw.rsplit(")", 1)[1].split()[:4]
    return ProcStat(pid, state, int(ppid), int(session))


def all_stats() -> Iterator[ProcStat]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := proc_stat(int(entry.name))) is not None:
            yield stat


def wchan(pid: int) -> str:
    """Where in the kernel ``pid`` sleeps (``/proc/<pid>/wchan``); ``""`` once it is gone.

    Tells a process blocked reading a pipe (``pipe_read``, ``anon_pipe_read`` or
    ``pipe_wait`` by kernel version) from one waiting on a semaphore (``futex_…``).
    """
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def live(stat: ProcStat | None) -> bool:
    """A zombie has exited: only its parent's wait is missing (orphans may stay zombies
    when the container's init does not reap them)."""
    return stat is not None and stat.state not in ("Z", "X")


def session_pids(session: int) -> list[int]:
    """Every live process of ``session``, orphans included."""
    return sorted(stat.pid for stat in all_stats() if stat.session == session and live(stat))


def pid_of_owner(lease_owner: str) -> int:
    """The process id in a lease owner (``host:pid:thread``)."""
    return int(lease_owner.rsplit(":", 2)[1])


def database_url(database: dict[str, Any]) -> str:
    """A ``DATABASE_URL`` for ``flowsite.database`` naming pytest's test database itself.

    ``database`` is the connection's settings dict after pytest-django created the test
    database, so ``NAME`` is the test database (for SQLite, the test file's path). On
    PostgreSQL the connection's ``OPTIONS`` go along (``prepare_threshold``: the
    processes prepare statements when the tests do).
    """
    engine, name = database["ENGINE"], str(database["NAME"])
    if engine.endswith("sqlite3"):
        path = Path(name)
        if not path.is_absolute() or name.startswith("file:") or ":memory:" in name:
            raise ValueError(f"acceptance tests need an SQLite file shared by processes: {name}")
        return f"sqlite:///{path}"
    if engine.endswith("postgresql"):
        credentials = quote(database.get("USER") or "", safe="")
        if database.get("PASSWORD"):
            credentials += ":" + quote(database["PASSWORD"], safe="")
        host = database.get("HOST") or ""
        port = f":{database['PORT']}" if database.get("PORT") else ""
        at = "@" if credentials else ""
        options = urlencode(database.get("OPTIONS") or {})
        query = f"?{options}" if options else ""
        return f"postgres://{credentials}{at}{host}{port}/{quote(name, safe='')}{query}"
    raise ValueError(f"acceptance tests run on SQLite or PostgreSQL, not {engine}")


@dataclass
class Process:
    """A started ``manage.py`` command and everything it forked."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    # Whether the test relies on it: a watched process that exits fails the next wait.
    watched: bool = True

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def descendants(self) -> list[int]:
        """Live processes of this session other than the command itself (orphans too)."""
        return [pid for pid in session_pids(self.pid) if pid != self.pid]

    def log_tail(self, chars: int = 3000) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text[-chars:]


class Processes:
    """Starts ``manage.py`` commands against the test database; stops all of them at the end."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.started: list[Process] = []
        self._numbers = itertools.count(1)

    def _popen(
        self, name: str, args: tuple[str, ...], env: dict[str, str] | None, stdout: Any
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log_path = self.log_dir / f"{next(self._numbers):02d}-{name}.log"
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                [sys.executable, str(MANAGE), *args],
                cwd=MANAGE.parent,
                env={**self.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=log if stdout is None else stdout,
                stderr=log,
                start_new_session=True,
            )
        return popen, log_path

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> Process:
        """Start ``manage.py <args>`` in the background, its output in a log file."""
        popen, log_path = self._popen(name, args, env, stdout=None)
        process = Process(name, popen, log_path)
        self.started.append(process)
        return process

    def run(
        self,
        name: str,
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = COMMAND_TIMEOUT_SECONDS,
    ) -> str:
        """Run ``manage.py <args>`` to completion and return its standard output."""
        popen, log_path = self._popen(name, args, env, stdout=subprocess.PIPE)
        process = Process(name, popen, log_path, watched=False)
        self.started.append(process)
        try:
            out, _ = popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop(process)
            raise AssertionError(
                f"manage.py {' '.join(args)} did not finish in {timeout} s:\n{process.log_tail()}"
            ) from None
        if popen.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} exited with {popen.returncode}:\n{process.log_tail()}"
            )
        return out.decode()

    def signal(self, process: Process, signum: int) -> None:
        """Send ``signum`` to the process's whole session group."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)

    def stop(self, process: Process, grace: float = STOP_GRACE_SECONDS) -> None:
        """Stop the process and every descendant, orphans included.

        SIGTERM goes to the command alone while it lives (qcluster then stops its
        sentinel and workers in order; signalling the whole group at once left its main
        process hanging in tests), else to what is left of its group. Whatever remains
        after ``grace`` seconds gets SIGKILL.
        """
        process.watched = False
        if process.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
        else:
            self.signal(process, signal.SIGTERM)
        self.signal(process, signal.SIGCONT)  # a stopped process acts on signals only now
        if not self._gone(process, grace):
            self.signal(process, signal.SIGKILL)
            if not self._gone(process, grace):
                raise RuntimeError(
                    f"{process.name}: processes {session_pids(process.pid)} survived SIGKILL"
                )
        process.popen.wait(timeout=grace)

    @staticmethod
    def _gone(process: Process, grace: float) -> bool:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            process.popen.poll()  # reap the leader, or it stays a zombie of ours
            if not session_pids(process.pid):
                return True
            time.sleep(0.05)
        return False

    def stop_all(self) -> None:
        """Stop everything started here, newest first; raise if anything survived."""
        problems = []
        for process in reversed(self.started):
            try:
                self.stop(process)
            except Exception as exc:  # keep stopping the others
                problems.append(f"{process.name}: {exc!r}")
        if problems:
            raise RuntimeError("; ".join(problems))

    def check_watched(self) -> None:
        """Fail if a process the test relies on has exited."""
        for process in self.started:
            if process.watched and not process.running():
                raise AssertionError(
                    f"{process.name} exited with {process.popen.returncode}:\n{process.log_tail()}"
                )

    def logs(self, chars: int = 2000) -> str:
        return "\n".join(
            f"----- {process.log_path.name} -----\n{process.log_tail(chars)}"
            for process in self.started
        )


def wait_for(
    what: str,
    check: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.2,
    on_poll: Callable[[], None] | None = None,
    describe: Callable[[], str] = lambda: "",
) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds.

    The failure says what was awaited and what state was reached instead (``describe``).
    ``on_poll`` runs before every check: process liveness, state sampling, chaos.
    """
    deadline = time.monotonic() + timeout
    while True:
        if on_poll is not None:
            on_poll()
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{describe()}")
        time.sleep(interval)


def read_json_line(output: str) -> Any:
    """The JSON document a helper command printed as its last line."""
    return json.loads(output.strip().splitlines()[-1])


@contextlib.contextmanager
def dispatching_to(processes: Processes) -> Iterator[None]:
    """Let verbs called in this process (pytest's) send ready work to ``processes``.

    Pytest's settings use the inline executor, which sends nothing: a run started here
    would wait for the redispatch scanner (30 s). Inside this block this process sends
    work as a web process of the deployment would: the django-q2 executor, on the ORM
    broker of the workflows database, with django-q2's name set to the processes'
    ``FLOWSITE_Q_NAME`` (django-q2 reads it as the queue's list key and as the salt its
    payloads are signed with, both fixed when django-q2 is imported, hence set here).
    """
    from django_q.conf import Conf

    name = processes.env["FLOWSITE_Q_NAME"]
    wanted = {"PREFIX": name, "CLUSTER_NAME": name, "ORM": "default"}
    saved = {attribute: getattr(Conf, attribute) for attribute in wanted}
    executor = override_settings(WORKFLOWS={**settings.WORKFLOWS, "EXECUTOR": "django_q"})
    for attribute, value in wanted.items():
        setattr(Conf, attribute, value)
    try:
        with executor:
            yield
    finally:
        for attribute, value in saved.items():
            setattr(Conf, attribute, value)


RACE_TIMEOUT = 60.0  # two Django starts, or one round, on a loaded 2-core machine

Call = tuple[str, str, str]  # an ``acceptance_race`` call: the verb and two arguments


@dataclass(frozen=True)
class Side:
    """One racer of :func:`race`: its calls, one per round, and options of its own."""

    calls: list[Call]
    options: tuple[str, ...] = ()


def race(
    processes: Processes, directory: Path, sides: dict[str, Side], *options: str
) -> list[dict[str, dict[str, Any]]]:
    """Race the sides' calls round by round, each side a process of its own
    (``acceptance_race``): call ``i`` of every side starts at the same instant.

    Every process sets Django up and opens its connection first; only once all are
    ready does round 0's go file appear, which they poll every millisecond, so the calls
    meet in the database rather than one finishing while the other starts. Round
    ``i + 1`` goes once every side has written its outcome of round ``i``. ``options``
    go to every side. Returns each round's outcomes by side name (the command's
    docstring says their shape).
    """
    directory.mkdir(parents=True)
    [rounds] = {len(side.calls) for side in sides.values()}
    started = {
        name: processes.start(
            f"race-{name}",
            "acceptance_race",
            str(directory),
            name,
            *(word for call in side.calls for word in call),
            *side.options,
            *options,
        )
        for name, side in sides.items()
    }

    def written(prefix: str) -> bool:
        missing = [name for name in sides if not (directory / f"{prefix}-{name}").exists()]
        for name in missing:
            # Read again after the exit: the file is written before the process ends.
            if not started[name].running() and not (directory / f"{prefix}-{name}").exists():
                process = started[name]
                raise AssertionError(f"{process.name} exited early:\n{process.log_tail()}")
        return not missing

    wait_for(
        "every side to be ready", lambda: written("ready"), timeout=RACE_TIMEOUT, interval=0.01
    )
    outcomes = []
    for round_ in range(rounds):
        (directory / f"go-{round_}").touch()
        wait_for(
            f"every side's outcome of round {round_}",
            lambda round_=round_: written(f"out-{round_}"),
            timeout=RACE_TIMEOUT,
            interval=0.005,
        )
        outcomes.append(
            {name: json.loads((directory / f"out-{round_}-{name}").read_text()) for name in sides}
        )
    for process in started.values():
        process.watched = False
        if process.popen.wait(timeout=RACE_TIMEOUT) != 0:
            raise AssertionError(f"{process.name} failed:\n{process.log_tail()}")
    return outcomes
