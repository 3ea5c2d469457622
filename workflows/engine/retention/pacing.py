"""How many runs the next batch deletes: sized from what the last ones took.

A batch is one transaction, and while it runs on SQLite every other writer waits, and
on PostgreSQL it holds the locks of the rows it deleted. Its cost is not known in
advance: a run may have three events or thirty thousand, and a busy database takes
longer for the same rows. So each batch is measured, and the next one is sized so that,
at the cost per run expected, it takes about the target time. The cost expected is the
higher of the last batch's and a moving average of the batches before (one cheap batch
proves little; one slow batch is what the target is there to prevent): a batch grows by
half at most, shrinks at once, and never exceeds :data:`LARGEST_BATCH` runs.

Between two batches on SQLite the purge pauses as long as the last batch took
(:func:`pause_after`): writers wait for one file lock there (``workflows.backends.sqlite3``),
which is not handed out in turn, and a purge that took it again at once kept live
transactions out for seconds (``bench/retention.py --database sqlite``: live step
latency p99 409 ms, max 4.6 s, without the pause). On PostgreSQL a batch's locks are on
rows no live transaction touches, and the next batch starts at once.
"""

from __future__ import annotations

from dataclasses import dataclass

# The most runs one batch deletes, whatever the measurements say: the statements bind
# one parameter per run (and SQLite accepts at most 32,766), and a batch's rows stay
# few enough to hold in memory.
LARGEST_BATCH = 1000
# The first batch's size, before anything was measured.
FIRST_BATCH = 10
# How much a batch may grow over the last one.
GROWTH = 1.5
# The weight of the last batch in the moving average of the cost per run.
SMOOTHING = 0.3


def pause_after(seconds: float, vendor: str) -> float:
    """How long to wait after a batch that took ``seconds`` before the next one."""
    return seconds if vendor == "sqlite" else 0.0


@dataclass
class BatchSizer:
    """The size of the next batch, steered toward ``target`` seconds per transaction."""

    target: float
    size: int = FIRST_BATCH
    largest: int = LARGEST_BATCH
    # The moving average of the seconds a run cost (None until a batch deleted some).
    cost: float | None = None

    def __post_init__(self) -> None:
        self.size = max(1, min(self.size, self.largest))

    def measured(self, runs: int, seconds: float) -> int:
        """Take the measure of a batch that deleted ``runs`` runs in ``seconds``; return
        the next batch's size."""
        if runs <= 0:
            return self.size  # nothing deleted: nothing learnt about the cost of a run
        last = max(seconds, 0.0) / runs
        self.cost = last if self.cost is None else SMOOTHING * last + (1 - SMOOTHING) * self.cost
        expected = max(last, self.cost)
        grown = max(self.size + 1, int(self.size * GROWTH))
        wanted = int(self.target / expected) if expected > 0 else grown
        self.size = max(1, min(wanted, grown, self.largest))
        return self.size
