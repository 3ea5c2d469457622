"""CPU seconds per process role over a benchmark window, from ``/proc`` (Linux).

Issue #26 sets a step's cost in CPU, summed over every process that serves it, against the
ORM ceiling's CPU per transaction (``../shared/peers/pg_limit``, which reads ``/proc`` the
same way: ``utime + stime`` of each process). Wall-clock rates on this shared 2-CPU machine
move with whatever else runs; CPU per step moves far less, and says which process to
work on.

A window is two snapshots: :func:`snapshot` before, :func:`snapshot` after, and
:func:`cpu_by_role` the difference, split by role. The worker cluster is one process
group (sentinel, pusher, monitor, workers); which of its members are workers is known
only afterwards, from the steps' ``lease_owner`` (``host:pid:thread``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# The roles a window's CPU is split into, in report order. The first six serve the steps
# (the goal's sum); the script starting the runs and polling for their end, and its
# backend, are printed beside them but are not a step's cost.
WORKERS = "workers"
CLUSTER_OTHERS = "pusher, monitor, sentinel"
SWEEPER = "sweeper"
BACKENDS = "PostgreSQL backends of the cluster"
SWEEPER_BACKENDS = "PostgreSQL backend of the sweeper"
SERVER = "PostgreSQL server processes (walwriter, checkpointer, ...)"
SCRIPT = "script (starts the runs, polls)"
SCRIPT_BACKEND = "script's PostgreSQL backend"
STEP_ROLES = (WORKERS, CLUSTER_OTHERS, SWEEPER, BACKENDS, SWEEPER_BACKENDS, SERVER)
ROLES = (*STEP_ROLES, SCRIPT, SCRIPT_BACKEND)

# Processes of the server that serve no client connection, by their ``ps`` title
# (``postgres: [cluster: ]walwriter``). They work for every database of the server, so on
# a shared server they also count others' work.
_SERVER_TITLES = (
    b": checkpointer",
    b": background writer",
    b": walwriter",
    b": autovacuum",
    b": logical replication",
    b": stats",
    b": archiver",
)


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) that process ``pid`` has used; ``None`` once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def server_processes() -> list[int]:
    """PostgreSQL's processes that serve no connection (WAL writer, checkpointer, ...)."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"postgres: ") and any(t in title for t in _SERVER_TITLES):
            pids.append(int(entry.name))
    return pids


@dataclass
class Snapshot:
    """CPU seconds of every process of interest at one moment, by group then pid."""

    groups: dict[str, dict[int, float]] = field(default_factory=dict)


def snapshot(groups: Mapping[str, Iterable[int]]) -> Snapshot:
    """Each group's processes' CPU now; ``groups`` maps a name to its pids."""
    taken = Snapshot()
    for name, pids in groups.items():
        seconds = {pid: process_cpu(pid) for pid in pids}
        taken.groups[name] = {pid: cpu for pid, cpu in seconds.items() if cpu is not None}
    return taken


def used(before: Snapshot, after: Snapshot, name: str) -> dict[int, float]:
    """CPU seconds each process of group ``name`` used between the snapshots. A process
    that started in between counts whole; one that exited in between is lost (the
    benchmark's processes keep their connections, ``CONN_MAX_AGE``)."""
    earlier = before.groups.get(name, {})
    return {pid: cpu - earlier.get(pid, 0.0) for pid, cpu in after.groups.get(name, {}).items()}


def cpu_by_role(before: Snapshot, after: Snapshot, worker_pids: set[int]) -> dict[str, float]:
    """The window's CPU seconds by role (``ROLES``). Snapshot groups: ``cluster``,
    ``sweeper``, ``backends``, ``sweeper backends``, ``server``, ``script``, ``script
    backend``; the cluster's members in ``worker_pids`` are its workers."""
    cluster = used(before, after, "cluster")
    return {
        WORKERS: sum(cpu for pid, cpu in cluster.items() if pid in worker_pids),
        CLUSTER_OTHERS: sum(cpu for pid, cpu in cluster.items() if pid not in worker_pids),
        SWEEPER: sum(used(before, after, "sweeper").values()),
        BACKENDS: sum(used(before, after, "backends").values()),
        SWEEPER_BACKENDS: sum(used(before, after, "sweeper backends").values()),
        SERVER: sum(used(before, after, "server").values()),
        SCRIPT: sum(used(before, after, "script").values()),
        SCRIPT_BACKEND: sum(used(before, after, "script backend").values()),
    }


def per_step_ms(cpu: Mapping[str, float], steps: int) -> dict[str, float]:
    """Milliseconds of CPU per step by role, plus ``"per step"``: the steps' roles summed."""
    shares = {role: 1000 * cpu.get(role, 0.0) / steps for role in ROLES}
    shares["per step"] = sum(shares[role] for role in STEP_ROLES)
    return shares
