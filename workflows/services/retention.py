"""Purging the history of ended runs: batch after batch, each bounded in time.

:func:`purge_history` is what ``workflows_purge`` and the sweeper's retention scanner
call. It deletes the top-level runs ended before a cutoff, oldest first, in batches of
whole runs (:mod:`workflows.engine.retention.batches`): each batch is its own
transaction, timed, and the next one is sized from it toward ``batch_ms``
(:mod:`workflows.engine.retention.pacing`), so no transaction holds SQLite's write lock,
or PostgreSQL's row locks and the WAL, for long while live work waits. The batches
follow a keyset over (``finished_at``, ``id``); nothing is stored between purges: a
purge stopped at any point (killed, or at its ``max_runs`` or ``time_limit``) is
continued by the next one, which starts from the oldest run left.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from workflows.conf import workflow_settings
from workflows.engine.retention.batches import Batch, Position, TreeMoved, purge_batch
from workflows.engine.retention.pacing import FIRST_BATCH, LARGEST_BATCH, BatchSizer, pause_after
from workflows.engine.sql.connection import engine_connection
from workflows.errors import InvalidInput

# How many times in a row a batch rolled back by a reopened child run is read again
# (it then keeps that run) before the purge gives up.
MOVED_RETRIES = 3

# Why a purge stopped.
DONE = "done"
MAX_RUNS = "max_runs"
TIME_LIMIT = "time_limit"


@dataclass
class PurgeReport:
    """What a purge deleted so far, and how long its batches took."""

    before: datetime
    runs: int = 0
    child_runs: int = 0
    flows: int = 0
    rows: int = 0
    kept: int = 0
    batches: int = 0
    batch_seconds: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    stopped: str = DONE

    def add(self, batch: Batch, seconds: float) -> None:
        self.runs += batch.runs
        self.child_runs += batch.child_runs
        self.flows += batch.flows
        self.rows += batch.rows_deleted
        self.kept += batch.kept
        self.batches += 1
        self.batch_seconds.append(seconds)

    @property
    def runs_per_second(self) -> float:
        return self.runs / self.elapsed if self.elapsed > 0 else 0.0

    def batch_ms(self, pct: float) -> float:
        """The ``pct`` percentile of the batches' transaction times, in milliseconds."""
        if not self.batch_seconds:
            return 0.0
        ordered = sorted(self.batch_seconds)
        return 1000 * ordered[min(len(ordered) - 1, int(pct / 100 * len(ordered)))]

    def as_dict(self) -> dict[str, Any]:
        return {
            "before": self.before.isoformat(),
            "runs": self.runs,
            "child_runs": self.child_runs,
            "flows": self.flows,
            "rows": self.rows,
            "kept": self.kept,
            "batches": self.batches,
            "seconds": round(self.elapsed, 3),
            "runs_per_second": round(self.runs_per_second, 1),
            "batch_ms_p50": round(
                1000 * statistics.median(self.batch_seconds) if self.batch_seconds else 0.0, 1
            ),
            "batch_ms_p99": round(self.batch_ms(99), 1),
            "batch_ms_max": round(1000 * max(self.batch_seconds, default=0.0), 1),
            "stopped": self.stopped,
        }


def _positive(name: str, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or not value > 0):
        raise InvalidInput(f"{name} must be more than zero, got {value!r}")


def purge_history(
    *,
    before: datetime,
    batch_ms: float | None = None,
    max_runs: int | None = None,
    time_limit: timedelta | None = None,
    batch_size: int | None = None,
    on_batch: Callable[[PurgeReport, Batch], None] | None = None,
) -> PurgeReport:
    """Delete the top-level runs ended before ``before`` with everything of theirs, in
    batches of whole runs; return what went.

    ``batch_ms`` is the time each batch's transaction aims at (default
    ``WORKFLOWS["RETENTION_BATCH_MS"]``); ``batch_size`` fixes the number of runs per
    batch instead. The purge stops when no run is left, after ``max_runs`` runs, or
    before a batch that would end past ``time_limit`` (each batch expected to take as
    long as the last). On SQLite it pauses between batches as long as the last one took,
    so that live writers queued for the write lock go first
    (:func:`~workflows.engine.retention.pacing.pause_after`). ``on_batch`` is called
    after each batch with the totals so far.
    Call it outside a transaction of your own: each batch commits on its own.
    """
    _positive("batch_ms", batch_ms)
    _positive("max_runs", max_runs)
    _positive("batch_size", batch_size)
    if time_limit is not None and time_limit <= timedelta(0):
        raise InvalidInput(f"time_limit must be more than zero, got {time_limit!r}")
    target = (batch_ms if batch_ms is not None else workflow_settings.RETENTION_BATCH_MS) / 1000
    fixed = batch_size is not None
    sizer = (
        BatchSizer(target, size=batch_size, largest=batch_size)
        if batch_size is not None
        else BatchSizer(target, size=FIRST_BATCH, largest=LARGEST_BATCH)
    )
    limit = time_limit.total_seconds() if time_limit is not None else None
    report = PurgeReport(before=before)
    position: Position | None = None
    started, last, moved, pause = time.monotonic(), 0.0, 0, 0.0
    vendor = engine_connection().vendor
    while True:
        report.elapsed = time.monotonic() - started
        if max_runs is not None and report.runs >= max_runs:
            report.stopped = MAX_RUNS
            break
        if limit is not None and report.batches and report.elapsed + pause + last > limit:
            report.stopped = TIME_LIMIT
            break
        time.sleep(pause)
        size = sizer.size if max_runs is None else min(sizer.size, max_runs - report.runs)
        began = time.monotonic()
        try:
            batch = purge_batch(before=before, after=position, size=size)
        except TreeMoved:
            moved += 1
            if moved > MOVED_RETRIES:
                raise
            continue
        last, moved = time.monotonic() - began, 0
        if not batch.read:
            break
        position = batch.position
        report.add(batch, last)
        if not fixed:
            sizer.measured(batch.runs, last)
        report.elapsed = time.monotonic() - started
        if on_batch is not None:
            on_batch(report, batch)
        if batch.read < size:
            break
        pause = pause_after(last, vendor)
    report.elapsed = time.monotonic() - started
    return report
