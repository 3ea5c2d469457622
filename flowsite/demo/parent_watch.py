"""Whether the supervisor's parent was sent a stop signal it does not pass on.

`make run` leaves make as the supervisor's parent. GNU make passes SIGTERM on to the
recipe it runs, but not SIGINT or SIGHUP: it takes those for a terminal's, sent to the
whole foreground group, so it resets the signal to its default action, waits for its
children, and only then dies of it. A process manager that sends SIGINT to make's pid
alone (``kill -INT PID``) therefore reached nobody: make waited for a supervisor that
never heard of the signal, and the site kept running.

What a child can see of this on Linux: ``/proc/PID/status`` lists in ``SigCgt`` the
signals a process catches. make catches SIGINT and SIGHUP while it runs a recipe, and
stops catching the one it received from the moment its handler starts. So a stop
signal the parent caught when the supervisor started, and catches no longer, is one the
parent was sent. SIGTERM is not watched: make sends it on itself, and learning it twice
would count as a second signal (which kills at once). Where ``/proc`` is missing the
watch sees nothing, and only signals sent to the supervisor itself stop it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

# The stop signals a parent may take without passing them on (make: SIGINT, SIGHUP).
WATCHED = (signal.SIGINT, signal.SIGHUP)


def caught_signals(pid: int) -> frozenset[int] | None:
    """The signals process ``pid`` has a handler for, or ``None`` if that cannot be read."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            mask = int(line.split()[1], 16)
            return frozenset(number for number in range(1, 65) if mask >> (number - 1) & 1)
    return None


class ParentWatch:
    """Created when the supervisor starts: which of :data:`WATCHED` its parent catches."""

    def __init__(self) -> None:
        self.parent = os.getppid()
        caught = caught_signals(self.parent) or frozenset()
        self.watched = tuple(signum for signum in WATCHED if signum in caught)

    def signal_received(self) -> signal.Signals | None:
        """A watched signal the parent no longer catches: it was sent that signal.

        ``None`` while it still catches them all, and once the supervisor has another
        parent (the old one is gone; what it was sent can no longer be read).
        """
        if not self.watched or os.getppid() != self.parent:
            return None
        caught = caught_signals(self.parent)
        if caught is None:
            return None
        for signum in self.watched:
            if signum not in caught:
                return signal.Signals(signum)
        return None
