"""Following one run as ``tail -f`` follows a file: its events and its steps' log frames,
each read after its own cursor, as they commit (``workflows_tail``).

Events are read in commit order (:func:`~workflows.queries.event_cursor.run_events_after`),
so a follower never skips one that commits after a later id; frames are read per step
after the last ``seq`` seen (:func:`~workflows.queries.frames.frames`), only for steps
whose ``frames_written`` moved past it. :meth:`RunTail.wait` blocks until there is
something new, woken by the commit of the run's events (``run:<id>``) or of a step's
frames (``frames:<step id>``), with the long poll's backstop read besides.

The tail has ended when the run is in a final status and every event of the run has
been handed out: a final status read before its events are readable (on PostgreSQL a
transaction still open holds the horizon back) is not the end yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from workflows.models import Event, Run, Step
from workflows.queries.event_cursor import START, Position, run_events_after
from workflows.queries.frames import MAX_FRAMES_LIMIT, LogFrame, frames
from workflows.queries.long_poll import long_poll
from workflows.queries.results import run_topic
from workflows.queries.runs import get_run
from workflows.status import RUN_FINAL

__all__ = ["READ_LIMIT", "RunTail", "StepFrame", "TailBatch"]

# Events read at most per read; a run with a longer history is handed out in several.
READ_LIMIT = 500


@dataclass(frozen=True)
class StepFrame:
    """A log frame with the name of the step that wrote it."""

    step: str
    frame: LogFrame


@dataclass(frozen=True)
class TailBatch:
    """What one read found: events and frames, each in its own order, and whether the
    tail has ended (the run is final and nothing of it is left to hand out)."""

    events: list[Event] = field(default_factory=list)
    frames: list[StepFrame] = field(default_factory=list)
    status: str = ""
    ended: bool = False

    def entries(self) -> list[Event | StepFrame]:
        """Events and frames together, by the time they were written."""
        return sorted([*self.events, *self.frames], key=_moment)

    def __bool__(self) -> bool:
        return bool(self.events or self.frames or self.ended)


def _moment(entry: Event | StepFrame) -> datetime:
    return entry.frame.at if isinstance(entry, StepFrame) else entry.created_at


class RunTail:
    """The cursors of one follower of a run: the last event position and, per step,
    the last frame ``seq`` handed out. Each :meth:`read` moves them past what it returns.
    """

    def __init__(self, run: Run | UUID | str) -> None:
        self.run_id = run.pk if isinstance(run, Run) else get_run(run).pk
        self.position: Position = START
        self.events_seen = 0
        self.frames_after: dict[int, int] = {}

    def read(self) -> TailBatch:
        """Everything new since the last read (up to :data:`READ_LIMIT` events and
        :data:`~workflows.queries.frames.MAX_FRAMES_LIMIT` frames per step)."""
        status = get_run(self.run_id).status
        steps = Step.objects.filter(run_id=self.run_id).only("id", "name", "frames_written")
        events = run_events_after(self.run_id, self.position, READ_LIMIT)
        if events:
            self.position = Position(events[-1].xid, events[-1].pk)
            self.events_seen += len(events)
        found: list[StepFrame] = []
        for step in steps.order_by("id"):
            after = self.frames_after.get(step.pk, 0)
            if step.frames_written <= after:
                continue
            batch = frames(step, after=after, limit=MAX_FRAMES_LIMIT)
            # A short batch holds everything up to frames_written (written in the same
            # transaction): numbers below it that are missing were trimmed, not pending.
            last = step.frames_written if len(batch) < MAX_FRAMES_LIMIT else after
            self.frames_after[step.pk] = max(batch[-1].seq if batch else after, last)
            found.extend(StepFrame(step.name, frame) for frame in batch)
        ended = (
            status in RUN_FINAL
            and not events
            and not found
            and self.events_seen >= Event.objects.filter(run_id=self.run_id).count()
        )
        return TailBatch(events=events, frames=found, status=status, ended=ended)

    def topics(self) -> list[str]:
        """The wake-up topics of what the tail reads: the run's events, its steps' frames."""
        step_ids = Step.objects.filter(run_id=self.run_id).values_list("id", flat=True)
        return [run_topic(self.run_id), *(f"frames:{step_id}" for step_id in step_ids)]

    def wait(self, timeout: float) -> TailBatch:
        """The next read with something in it, or the empty read at ``timeout`` seconds."""
        return long_poll(self.topics(), self.read, until=bool, timeout=timeout)
