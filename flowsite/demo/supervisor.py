"""Run a few processes together and stop them together: the demo's `make run`.

Each child runs in its own process group, so the terminal's Ctrl-C reaches only this
supervisor, which then decides how the children stop. A stop signal sent to its parent
alone counts as one sent to the supervisor when the parent does not pass it on (make
and SIGINT, see ``parent_watch``). The stop signal goes to each
child's main process, then after a grace period SIGKILL goes to each child's whole group
(a qcluster is a parent with forked workers), so nothing outlives the supervisor and
keeps the database open. When one child exits on its own the demo is broken, so the
others are stopped too and the supervisor exits non-zero.

Why the main process and not the group: django-q2's cluster stops in order (pusher,
then workers after their current task, then monitor) when its parent is signalled. A
SIGTERM to the whole group instead kills the sentinel and the workers by the default
action mid-task, and the parent then blocks in its own stop, until SIGKILL, every time.

POSIX only (process groups); the demo's Makefile is POSIX only too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType

from flowsite.demo.parent_watch import ParentWatch

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
POLL_INTERVAL = 0.1
# After SIGKILL a process is gone as soon as the kernel reaps it; this only bounds a wait
# that should never take long.
REAP_TIMEOUT = 5.0


@dataclass(frozen=True)
class Child:
    """One process to run: a name for messages and its command line."""

    name: str
    argv: Sequence[str]


class _Started:
    def __init__(self, child: Child) -> None:
        self.name = child.name
        # process_group=0: the child leads a new group, so the terminal's Ctrl-C does not
        # reach it behind the supervisor's back, and its own children (qcluster's
        # workers) can be killed with it as one group.
        self.process = subprocess.Popen(child.argv, stdin=subprocess.DEVNULL, process_group=0)

    def signal(self, signum: int) -> None:
        """Signal the main process; a no-op once it has been reaped."""
        self.process.send_signal(signum)

    def kill_group(self) -> None:
        """SIGKILL the whole group, even after the main process exited: a qcluster parent
        that died can leave its workers behind in its group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


class Supervisor:
    """Start ``children``, wait for a stop signal or for one of them to exit, and stop
    all of them within ``grace`` seconds plus the time SIGKILL takes."""

    def __init__(self, children: Sequence[Child], grace: float, log: Callable[[str], None]) -> None:
        self.children = children
        self.grace = grace
        self.log = log
        self.received: list[int] = []
        self._wake = threading.Event()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        self._wake.set()

    def run(self) -> int:
        """Run until stopped. Return 0 after a stop signal, else the failed child's exit
        status (1 if it exited with 0: a demo process that ends on its own is a failure)."""
        # Handlers first: a Ctrl-C while the children start must still stop them all.
        # A child gets default handlers back at exec, even where this process inherited
        # SIGINT as ignored (a background job of a non-interactive shell).
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)
        parent = ParentWatch()
        started: list[_Started] = []
        try:
            for child in self.children:
                if self.received:
                    break
                started.append(_Started(child))
            exited = self._wait_for_stop_or_exit(started, parent)
        except BaseException:
            self._stop(started, signal.SIGTERM)
            raise
        if exited is None:
            signum = self.received[0]
            # SIGHUP (the terminal went away) is not something the children handle.
            forwarded = signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM
            self.log(f"got {signal.Signals(signum).name}: stopping {self._names(started)}")
            self._stop(started, forwarded)
            return 0
        status = exited.process.returncode
        self.log(f"{exited.name} exited with status {status}: stopping the others")
        self._stop(started, signal.SIGTERM)
        return status if status > 0 else 1

    def _wait_for_stop_or_exit(
        self, started: list[_Started], parent: ParentWatch
    ) -> _Started | None:
        while not self.received:
            for child in started:
                if child.process.poll() is not None:
                    return child
            sent_to_parent = parent.signal_received()
            # A Ctrl-C reaches the parent and this process at once: the signal is already
            # pending here when the parent's handler starts, and its handler has run by
            # now, so it is not counted twice (a second signal would kill at once).
            if sent_to_parent is not None and not self.received:
                self.log(f"parent process {parent.parent} got {sent_to_parent.name}")
                self.received.append(sent_to_parent)
                break
            self._wake.wait(POLL_INTERVAL)
        return None

    def _stop(self, started: list[_Started], signum: int) -> None:
        """Send ``signum`` to every child, wait up to the grace period for them (a second
        stop signal cuts it short), then SIGKILL every group: that also takes down
        anything a child left behind when it exited."""
        already_signalled = len(self.received)
        for child in started:
            child.signal(signum)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and len(self.received) <= already_signalled:
            if all(child.process.poll() is not None for child in started):
                break
            time.sleep(POLL_INTERVAL)
        late = [child for child in started if child.process.poll() is None]
        if late:
            self.log(f"{self._names(late)} still running: sending SIGKILL")
        for child in started:
            child.kill_group()
        for child in started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=REAP_TIMEOUT)

    @staticmethod
    def _names(started: list[_Started]) -> str:
        return ", ".join(child.name for child in started) or "nothing"


def supervise(children: Sequence[Child], grace: float, log: Callable[[str], None]) -> int:
    """Run ``children`` until a stop signal or until one exits; return the exit status."""
    return Supervisor(children, grace, log).run()
