"""Read side of live telemetry: the log frames a step's attempts wrote (``ctx.log``).

A frame's ``seq`` is the tail cursor: numbered per step, on across attempts, never
reused. Frames trimmed by the per-attempt bound leave gaps in the numbering (counted in
``Step.frames_dropped``), so a reader asks for what comes after the last ``seq`` it saw,
never for "the next n numbers". Nothing here opens a transaction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.db.models import Subquery

from workflows.errors import InvalidInput
from workflows.models import Frame, Step, StepRound
from workflows.models.leased import ReportedProgress, UnitTelemetry
from workflows.status import FrameStream

# What an attempt reports of itself, as columns of its row: the last ``ctx.progress``
# and the ``ctx.summary`` document (the columns of ``ReportedProgress``).
REPORTED_FIELDS = tuple(field.name for field in ReportedProgress._meta.local_fields)
# A task step's, with the round they belong to and the counts of ``ctx.log``'s frames.
# Shown wherever a step is (``explain``'s steps, the API's step representations).
STEP_TELEMETRY_FIELDS = ("round", *REPORTED_FIELDS, "frames_written", "frames_dropped")
# A fan-out item's or a compensation's (:mod:`workflows.engine.telemetry.unit_log`): its
# log frames are kept on the row.
UNIT_TELEMETRY_FIELDS = tuple(field.name for field in UnitTelemetry._meta.local_fields)

# The largest seq a cursor may name: the column is a 64-bit integer.
MAX_SEQ = 2**63 - 1
# The most frames one call returns, and how many it returns unless asked.
MAX_FRAMES_LIMIT = 1000
DEFAULT_FRAMES_LIMIT = 200


@dataclass(frozen=True)
class LogFrame:
    """One frame as a reader sees it: ``seq`` is the cursor to pass as ``after``."""

    seq: int
    attempt: int
    stream: str
    text: str
    at: datetime

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def frames(
    step: Step | int,
    after: int | None = None,
    limit: int = DEFAULT_FRAMES_LIMIT,
    stream: str | None = None,
    round: int | None = None,
) -> list[LogFrame]:
    """Return the step's frames with ``seq`` greater than ``after`` (all from the first
    when ``None``), oldest first, at most ``limit`` (1 to :data:`MAX_FRAMES_LIMIT`), of
    one ``stream`` when given (``stdout``, ``stderr``, ``event``).

    Of the step's current round unless ``round`` names an ended one (``StepRound``): a
    rerun, a retry or a loop's next iteration starts the step with no frames, and the
    frames of the rounds before stay readable by their round. One indexed query (the
    unique ``(step, seq)``; one more for an ended round). Bad arguments raise
    :class:`~workflows.InvalidInput` naming the field (``after``, ``limit``, ``stream``,
    ``round``).
    """
    after, limit, stream = checked_cursor(after, limit, stream)
    step_id = step.pk if isinstance(step, Step) else step
    rows = Frame.objects.filter(step_id=step_id, seq__gt=after or 0)
    if round is not None:
        ended = (
            StepRound.objects.filter(step_id=step_id, round=round)
            .values_list("frames_after", "frames_through")
            .first()
        )
        if ended is None:
            if not Step.objects.filter(pk=step_id, round=round).exists():
                raise InvalidInput(f"step {step_id} has no round {round}", field="round")
            round = None
        else:
            rows = rows.filter(seq__gt=ended[0], seq__lte=ended[1])
    if round is None:
        rows = rows.filter(
            seq__gt=step.round_frames_before
            if isinstance(step, Step)
            else Subquery(Step.objects.filter(pk=step_id).values("round_frames_before")[:1])
        )
    if stream is not None:
        rows = rows.filter(stream=stream)
    return [
        LogFrame(*row)
        for row in rows.order_by("seq").values_list("seq", "attempt", "stream", "text", "at")[
            :limit
        ]
    ]


def frames_dropped(step: Step, round: int | None = None) -> int:
    """How many frames the per-attempt bound trimmed in ``step``'s current round, or in
    its ended round ``round`` (0 for a round it does not have)."""
    if round is None or round == step.round:
        return step.frames_dropped
    found = (
        StepRound.objects.filter(step_id=step.pk, round=round)
        .values_list("frames_dropped", flat=True)
        .first()
    )
    return found or 0


def checked_cursor(after: Any, limit: Any, stream: Any) -> tuple[int | None, int, str | None]:
    """``after``, ``limit`` and ``stream`` checked (see :func:`frames`), or
    :class:`~workflows.InvalidInput` naming the first that is wrong."""
    if after is not None and (not _whole(after) or not 0 <= after <= MAX_SEQ):
        raise InvalidInput("after must be a whole number of 0 or more (a frame seq)", field="after")
    if not _whole(limit) or not 1 <= limit <= MAX_FRAMES_LIMIT:
        raise InvalidInput(
            f"limit must be a whole number from 1 to {MAX_FRAMES_LIMIT}", field="limit"
        )
    if stream is not None and stream not in FrameStream.values:
        raise InvalidInput(f"stream must be one of {', '.join(FrameStream.values)}", field="stream")
    return after, limit, stream


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
