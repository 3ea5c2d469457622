"""How many runs the next batch deletes: sized from what the last one took.

A batch is one transaction, and while it runs on SQLite every other writer waits, and
on PostgreSQL it holds the locks of the rows it deleted. Its cost is not known in
advance: a run may have three events or thirty thousand, and a busy database takes
longer for the same rows. So each batch is measured, and the next one is sized so that
at the measured cost per run it takes about the target time: growing at most twofold
per batch (one cheap batch proves little), shrinking at once (one slow batch is what the
target is there to prevent), never past :data:`LARGEST_BATCH` runs.
"""

from __future__ import annotations

from dataclasses import dataclass

# The most runs one batch deletes, whatever the measurements say: the statements bind
# one parameter per run (and SQLite accepts at most 32,766), and a batch's rows stay
# few enough to hold in memory.
LARGEST_BATCH = 1000
# The first batch's size, before anything was measured.
FIRST_BATCH = 10


@dataclass
class BatchSizer:
    """The size of the next batch, steered toward ``target`` seconds per transaction."""

    target: float
    size: int = FIRST_BATCH
    largest: int = LARGEST_BATCH

    def __post_init__(self) -> None:
        self.size = max(1, min(self.size, self.largest))

    def measured(self, runs: int, seconds: float) -> int:
        """Take the measure of a batch that deleted ``runs`` runs in ``seconds``; return
        the next batch's size."""
        if runs <= 0:
            return self.size  # nothing deleted: nothing learnt about the cost of a run
        wanted = self.size * 2 if seconds <= 0 else int(self.target * runs / seconds)
        self.size = max(1, min(wanted, self.size * 2, self.largest))
        return self.size
