"""The per-attempt bound on log frames: at most so many frames and so many bytes of text,
trimmed oldest first, with the count of frames dropped kept on the step.

Only the attempt that holds the lease writes its frames, so the attempt's own account
of what it has in the table (:class:`FrameBudget`) is exact, and deciding what to drop
costs no query: the flush deletes the oldest kept frames in one statement and leaves
out of its insert the new frames that would not fit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Trim:
    """What a flush drops: ``old`` kept frames (oldest first, the last of them
    ``old_through``, a seq) and the first ``new`` frames of its own batch."""

    old: int = 0
    old_through: int = 0
    new: int = 0

    @property
    def dropped(self) -> int:
        return self.old + self.new


@dataclass
class FrameBudget:
    """This attempt's frames in the table, oldest first, as ``(seq, bytes)``, against the
    bound of ``max_frames`` frames and ``max_bytes`` bytes of text."""

    max_frames: int
    max_bytes: int
    kept: deque[tuple[int, int]] = field(default_factory=deque)
    kept_bytes: int = 0

    def plan(self, sizes: Sequence[int]) -> Trim:
        """What to drop so that the kept frames plus new ones of ``sizes`` fit, oldest first.

        A single frame larger than the whole byte bound is dropped as well: the bound
        holds whatever one call logs.
        """
        count, total = len(self.kept) + len(sizes), self.kept_bytes + sum(sizes)
        old = 0
        while old < len(self.kept) and (count > self.max_frames or total > self.max_bytes):
            total -= self.kept[old][1]
            count -= 1
            old += 1
        new = 0
        while new < len(sizes) and (count > self.max_frames or total > self.max_bytes):
            total -= sizes[new]
            count -= 1
            new += 1
        return Trim(old, self.kept[old - 1][0] if old else 0, new)

    def apply(self, trim: Trim, first_seq: int, sizes: Sequence[int]) -> None:
        """Account for a committed flush: ``trim`` done, the new frames numbered from
        ``first_seq`` inserted (those ``trim`` kept)."""
        for _ in range(trim.old):
            self.kept_bytes -= self.kept.popleft()[1]
        for offset in range(trim.new, len(sizes)):
            self.kept.append((first_seq + offset, sizes[offset]))
            self.kept_bytes += sizes[offset]
