"""What a running attempt reported and has not written yet: the payload of one flush."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

# A ``ctx.log`` call waiting for the next flush: (stream, text, at, size), ``at`` its
# ``time.time()`` and ``size`` the bytes of ``text`` in UTF-8 (what the per-attempt bound
# counts). A plain tuple: one is made per call, and a named tuple's constructor costs
# several times more.
PendingFrame = tuple[str, str, float, int]


class Progress(NamedTuple):
    """The last ``ctx.progress`` call: only the last one before a flush is written."""

    done: float
    total: float | None
    message: str


@dataclass
class PendingTelemetry:
    """Everything one flush writes: the last progress, the frames in call order, and
    the summary patches in call order (applied one after another)."""

    progress: Progress | None = None
    frames: list[PendingFrame] = field(default_factory=list)
    patches: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.progress is not None or bool(self.frames) or bool(self.patches)

    def take(self) -> PendingTelemetry:
        """Hand over what is pending and start empty: what is reported during the write
        goes to the next flush (the caller holds the lock the appends take)."""
        taken = PendingTelemetry(self.progress, self.frames, self.patches)
        self.progress, self.frames, self.patches = None, [], []
        return taken
