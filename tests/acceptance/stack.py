"""A Flowsite deployment made of real processes: qcluster, sweepers, a process starting runs.

All of them use the acceptance settings and pytest's test database; pytest itself only
reads rows (and writes files the handlers wait for). Every wait samples the state
monitor and checks that the processes the test relies on are still alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from tests.acceptance.flowapp.handlers import BUSY_DIR, RELEASE_DIR
from tests.acceptance.harness import (
    Process,
    Processes,
    pid_of_owner,
    read_json_line,
    wait_for,
    wchan,
)
from tests.acceptance.invariants import StateMonitor
from workflows.models import Run, Step, Timer
from workflows.status import RUN_FINAL, StepStatus, TimerStatus

T = TypeVar("T")

# The chaos loops kill a step's first two attempts at most: with PATIENT's six, every step
# keeps attempts to spare however the kills fall.
KILLED_ATTEMPTS = 2

# What django-q2's children log when they start, by role.
_STARTED = {
    "worker": re.compile(r"ready for work at (\d+)"),
    "monitor": re.compile(r"monitoring at (\d+)"),
}


class Stack:
    """Processes of one test, plus the waits and state reports that go with them."""

    def __init__(self, processes: Processes, var_dir: Path) -> None:
        self.processes = processes
        self.var_dir = var_dir
        self.monitor = StateMonitor()
        self.kills: list[int] = []  # pids the chaos loop killed

    # -- processes -----------------------------------------------------------------------

    def qcluster(
        self, workers: int = 2, env: dict[str, str] | None = None, command: str = "workflows_worker"
    ) -> Process:
        """Start a worker cluster as deployments do (``command="qcluster"``: django-q2's own)."""
        return self.processes.start(
            "qcluster", command, env={"FLOWSITE_WORKERS": str(workers), **(env or {})}
        )

    def sweeper(self, env: dict[str, str] | None = None) -> Process:
        return self.processes.start("sweeper", "workflows_sweeper", env=env)

    def start_runs(
        self, workflow: str, inputs: Sequence[dict[str, Any]], env: dict[str, str] | None = None
    ) -> list[UUID]:
        """Start one run per input from a separate process, which dispatches them."""
        out = self.processes.run("start", "acceptance_start", workflow, json.dumps(inputs), env=env)
        return [UUID(run_id) for run_id in read_json_line(out)]

    def release(self, run_id: UUID) -> None:
        """Let the held attempt of ``run_id`` go on (see ``handlers.hold``)."""
        path = self.var_dir / RELEASE_DIR / str(run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def busy_steps(self, cluster: Process) -> dict[int, int]:
        """Steps running right now in ``cluster``'s processes: {worker pid: step id}."""
        ours = set(cluster.descendants())
        running = Step.objects.filter(status=StepStatus.RUNNING).values_list("lease_owner", "pk")
        return {pid: pk for owner, pk in running if (pid := pid_of_owner(owner)) in ours}

    def kill_random_worker(self, cluster: Process) -> int | None:
        """SIGKILL one of ``cluster``'s workers that is inside a handler right now.

        Only there, because django-q2's workers share multiprocessing queues whose locks
        die with their holder: an idle worker holds the task queue's read lock while it
        waits, a worker's result thread holds the result queue's write lock while it
        sends, and a worker killed holding either stops a plain ``qcluster`` for good (its
        replacement waits on the same lock). ``workflows_worker`` recovers from that
        (``test_idle_worker_kill.py``); the chaos test is about kills in the middle of
        steps. Inside a handler a worker never holds the first, and holds the second
        only while its previous result is still being sent: microseconds while the
        monitor keeps up (see ``save_limit`` in the acceptance settings). The marker is
        checked again just before the kill; a worker that left its handler meanwhile is
        still recording the outcome, not back on the queue.

        A worker running a step's ``KILLED_ATTEMPTS + 1``-th attempt or a later one is
        spared: near a test's end a single step may be all that runs, and killing every
        attempt of it would fail it for want of attempts, which no engine can prevent.
        """
        markers = self.var_dir / BUSY_DIR
        busy = [
            pid
            for pid in cluster.descendants()
            if _attempt_in(markers / str(pid)) in range(1, KILLED_ATTEMPTS + 1)
        ]
        if not busy:
            return None
        pid = random.choice(busy)
        if not (markers / str(pid)).exists():
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            self.kills.append(pid)
            return pid
        return None

    def children(self, cluster: Process, role: str = "worker") -> list[int]:
        """Live processes of ``cluster`` in ``role``: ``"worker"`` or ``"monitor"``."""
        log = cluster.log_tail(chars=10**7)
        started = {int(pid) for pid in _STARTED[role].findall(log)}
        return sorted(started & set(cluster.descendants()))

    def task_queue_reader(self, cluster: Process) -> int | None:
        """The idle worker of ``cluster`` blocked reading the task queue's pipe, if any.

        ``multiprocessing.Queue.get()`` holds the queue's read lock while it blocks in
        that read, so this is the one worker that holds the lock; the other idle workers
        wait on the lock itself (a futex).
        """
        readers = [pid for pid in self.children(cluster) if "pipe" in wchan(pid)]
        return readers[0] if len(readers) == 1 else None

    # -- waiting -------------------------------------------------------------------------

    def wait_for(
        self,
        what: str,
        check: Callable[[], T],
        *,
        timeout: float,
        run_ids: Iterable[UUID] | None = None,
        on_poll: Callable[[], None] | None = None,
        interval: float = 0.2,
    ) -> T:
        """Wait for ``check``; on timeout, report the runs' state and the processes' logs."""
        run_ids = list(run_ids) if run_ids is not None else None

        def poll() -> None:
            self.processes.check_watched()
            self.monitor.sample()
            if on_poll is not None:
                on_poll()

        return wait_for(
            what,
            check,
            timeout=timeout,
            interval=interval,
            on_poll=poll,
            describe=lambda: f"{state_report(run_ids)}\n{self.processes.logs()}",
        )

    def wait_finished(
        self,
        run_ids: Sequence[UUID],
        *,
        timeout: float,
        on_poll: Callable[[], None] | None = None,
    ) -> dict[UUID, Run]:
        """Wait until every run is in a final state; return them by id."""

        def finished() -> dict[UUID, Run] | None:
            runs = {run.pk: run for run in Run.objects.filter(pk__in=run_ids)}
            if len(runs) == len(run_ids) and all(r.status in RUN_FINAL for r in runs.values()):
                return runs
            return None

        return self.wait_for(
            f"{len(run_ids)} runs to finish",
            finished,
            timeout=timeout,
            run_ids=run_ids,
            on_poll=on_poll,
        )


def _attempt_in(marker: Path) -> int:
    """The attempt a busy worker's marker names; 0 once the worker has left its handler."""
    try:
        return int(marker.read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def state_report(run_ids: Sequence[UUID] | None = None) -> str:
    """Counts of run and step statuses and the unfinished steps, for failure messages."""
    runs = Run.objects.all() if run_ids is None else Run.objects.filter(pk__in=run_ids)
    steps = Step.objects.filter(run__in=runs)
    unfinished = steps.exclude(status__in=[StepStatus.COMPLETED, StepStatus.SKIPPED])
    lines = [
        f"runs: {dict(Counter(runs.values_list('status', flat=True)))}",
        f"steps: {dict(Counter(steps.values_list('status', flat=True)))}",
        f"scheduled timers: {Timer.objects.filter(status=TimerStatus.SCHEDULED).count()}",
        "unfinished steps (first 15):",
        *(
            f"  {s.run_id} {s.name} {s.status} attempt={s.attempt} owner={s.lease_owner!r} "
            f"lease_expires_at={s.lease_expires_at} error={str(s.error)[:200]}"
            for s in unfinished.order_by("pk")[:15]
        ),
    ]
    return "\n".join(lines)
