"""The figures ``bench/workers.py --peers`` compares its workers with, measured in the same sitting.

The machine is shared and noisy, so a ratio only means something when both sides were
measured minutes apart. This module runs, each in a subprocess of its own and while no
worker cluster is running:

* **inline**: ``bench/throughput.py`` (``run_pending`` in one process, SQLite), its
  ``engine step transitions/s`` line, and its ``engine steps/s, starts included`` line
  (no goal: the span the workers' window also covers);
* the shared peer scripts of ``../shared/peers/`` (``README.md`` there): **DBOS**
  (``dbos/run.sh``, SQLite in WAL or a PostgreSQL database of its own), **django-q2
  alone** (``django_q2/run.sh``, 2 workers, SQLite in WAL) and the **ORM ceiling**
  (``sqlite_limit/run.sh``, one Django CAS+insert transaction at a time);
* on PostgreSQL, the **ORM ceiling** of issue #26 (``pg_limit/run.sh``, ``django_2proc``:
  the same transaction from 2 processes) as a rate and as CPU per transaction, the
  clients' and PostgreSQL's together.

Each returns one number; a peer that fails is reported as missing with its reason,
never guessed.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# ../shared/peers as seen from the repository root; a checkout elsewhere (a worktree)
# names it with FLOWSITE_PEERS_DIR.
PEERS_DIR = Path(os.environ.get("FLOWSITE_PEERS_DIR") or REPO_ROOT.parent / "shared" / "peers")
PEER_TIMEOUT_SECONDS = 900
DBOS_POSTGRES_DB = "flowsite_bench_dbos" + os.environ.get("BENCH_PG_SUFFIX", "")

# bench/throughput.py with a small fan-out part: only its step figure is read here.
INLINE_ARGS = ("--runs", "200", "--orm-transactions", "500", "--query-runs", "5")
INLINE_FANOUT_ARGS = ("--fanout-items", "100", "--fanout-batch-size", "50")
INLINE_LINE = re.compile(r"engine step transitions/s\s+([\d,.]+)")
INLINE_WITH_STARTS_LINE = re.compile(r"engine steps/s, starts included\s+([\d,.]+)")


@dataclass
class Peer:
    """One peer's figure, or why there is none."""

    name: str
    what: str
    value: float | None
    error: str = ""
    decimals: int = 0  # how many the report prints: 0 for rates, more for milliseconds


def run_script(argv: list[str], env: dict[str, str] | None = None) -> str:
    """Run a peer to completion and return its standard output; raise with its stderr."""
    done = subprocess.run(
        argv,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=PEER_TIMEOUT_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"exit {done.returncode}: {' | '.join(last)}")
    return done.stdout


def json_field(out: str, *path: str) -> float:
    """A number from the last JSON line a peer script printed."""
    data: Any = json.loads(out.strip().splitlines()[-1])
    for key in path:
        data = data[key]
    return float(data)


def measured(name: str, what: str, measure: Callable[[], float], decimals: int = 0) -> Peer:
    try:
        return Peer(name, what, measure(), decimals=decimals)
    except (OSError, RuntimeError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
        return Peer(name, what, None, error=str(exc)[:300], decimals=decimals)


@functools.cache
def _inline_output() -> str:
    """One run of ``bench/throughput.py``: both inline figures are read from it."""
    return run_script(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "throughput.py"),
            *INLINE_ARGS,
            *INLINE_FANOUT_ARGS,
        ],
        env={"DATABASE_URL": ""},
    )


def _inline_figure(line: re.Pattern[str]) -> float:
    found = line.search(_inline_output())
    if found is None:
        raise ValueError(f"bench/throughput.py printed no line matching {line.pattern!r}")
    return float(found.group(1).replace(",", ""))


def inline() -> float:
    """Steps/s executing runs already started (the goal's inline rate)."""
    return _inline_figure(INLINE_LINE)


def inline_with_starts() -> float:
    """Steps/s starting the runs and executing them, as the workers' window counts."""
    return _inline_figure(INLINE_WITH_STARTS_LINE)


def dbos(postgres_url: str | None) -> float:
    env = {"DBOS_SYSDB_URL": postgres_url} if postgres_url else {"DBOS_SQLITE_WAL": "1"}
    out = run_script([str(PEERS_DIR / "dbos" / "run.sh")], env=env)
    return json_field(out, "sequential", "step_transitions_per_sec")


def django_q2_alone() -> float:
    out = run_script([str(PEERS_DIR / "django_q2" / "run.sh")], env={"Q2_SQLITE_WAL": "1"})
    return json_field(out, "tasks", "tasks_per_sec")


def orm_ceiling() -> float:
    out = run_script([str(PEERS_DIR / "sqlite_limit" / "run.sh")])
    return json_field(out, "django_wal_normal", "tx_per_sec")


@functools.cache
def _pg_limit_django_2proc() -> dict[str, float]:
    """``pg_limit``'s ``django_2proc`` figures: one run gives both the rate and the CPU."""
    out = run_script([str(PEERS_DIR / "pg_limit" / "run.sh")])
    return dict(json.loads(out.strip().splitlines()[-1])["django_2proc"])


def pg_orm_ceiling() -> float:
    """Django ORM CAS+insert transactions/s from 2 processes on PostgreSQL."""
    return float(_pg_limit_django_2proc()["tx_per_sec"])


def pg_orm_ceiling_cpu_ms() -> float:
    """CPU ms per ORM transaction, the clients' plus all of PostgreSQL's processes'."""
    figures = _pg_limit_django_2proc()
    return float(figures["client_cpu_ms_per_tx"]) + float(figures["postgres_cpu_ms_per_tx"])


def _inline_with_starts_peer() -> Peer:
    return measured(
        "inline with starts",
        "inline, starts included (bench/throughput.py), steps/s",
        inline_with_starts,
    )


def measure_ceilings(database: str) -> list[Peer]:
    """Issue #26's ceilings of ``database``: on PostgreSQL ``pg_limit``'s ORM transaction
    from 2 processes, its rate and its CPU; on SQLite the inline rate with the runs'
    starts in the window (one process writing back to back on the one write lock)."""
    if database != "postgres":
        return [_inline_with_starts_peer()]
    return [
        measured(
            "PG ORM ceiling", "ORM CAS+insert ceiling, 2 processes (pg_limit), tx/s", pg_orm_ceiling
        ),
        measured(
            "PG ORM ceiling CPU",
            "ORM ceiling's CPU per tx, client + PostgreSQL (pg_limit), ms",
            pg_orm_ceiling_cpu_ms,
            decimals=3,
        ),
    ]


def measure_peers(
    database: str, postgres: Callable[[str], AbstractContextManager[str]]
) -> list[Peer]:
    """The peers of ``database``: on SQLite inline, django-q2 alone, the ORM ceiling and
    DBOS on SQLite; on PostgreSQL DBOS in a database of its own (``postgres(name)`` is a
    context manager that creates and drops it and yields its URL)."""
    if database == "postgres":
        with postgres(DBOS_POSTGRES_DB) as url:
            sysdb = url.replace("postgres://", "postgresql://", 1)
            dbos_peer = measured("DBOS", "DBOS on PostgreSQL, steps/s", lambda: dbos(sysdb))
        return [*measure_ceilings(database), dbos_peer]
    return [
        measured("inline", "inline (bench/throughput.py), steps/s", inline),
        _inline_with_starts_peer(),
        measured("django-q2 peer", "django-q2 alone (peer, 2 workers), tasks/s", django_q2_alone),
        measured("ORM ceiling", "ORM CAS+insert ceiling (peer), tx/s", orm_ceiling),
        measured("DBOS", "DBOS on SQLite (WAL), steps/s", lambda: dbos(None)),
    ]
