"""The last lines of several steps' logs at once: what the run page shows under each
running step's progress bar.

:func:`~workflows.queries.frames.frames` reads forward from a cursor, one step at a
time; a page showing the tail of every running step of a run would cost one query per
step. Here one query reads them all: a step's frames are numbered on without reuse
(``Step.frames_written`` is the last number given), so the last ``count`` of them lie
above ``frames_written - count``, an indexed range per step. Trimmed frames leave gaps
below, never above, so a tail is never short because of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from operator import or_

from django.db.models import Q

from workflows.models import Frame, Step
from workflows.queries.frames import LogFrame

__all__ = ["TAIL_LINES", "log_tails"]

# Lines the run page shows per running step; the Log view has the rest.
TAIL_LINES = 5


def log_tails(steps: Iterable[Step], count: int = TAIL_LINES) -> dict[int, list[LogFrame]]:
    """Each step's last ``count`` frames, oldest first, keyed by step id; one query for
    all the steps (none when none has frames). A step without frames maps to ``[]``."""
    written = {step.pk: step.frames_written for step in steps}
    tails: dict[int, list[LogFrame]] = {step_id: [] for step_id in written}
    ranges = [
        Q(step_id=step_id, seq__gt=last - count) for step_id, last in written.items() if last > 0
    ]
    if not ranges:
        return tails
    rows = (
        Frame.objects.filter(reduce(or_, ranges))
        .order_by("step_id", "seq")
        .values_list("step_id", "seq", "attempt", "stream", "text", "at")
    )
    for step_id, seq, attempt, stream, text, at in rows:
        tails[step_id].append(LogFrame(seq, attempt, stream, text, at))
    return tails
