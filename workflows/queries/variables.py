"""Who wrote a run's variables: read from its history, the ``run.variables_set`` events.

The engine keeps no writer per variable on the run: each commit of a step's patches is
one event naming the step and the attempt, in commit order, so the history answers who
last wrote each variable without a column the hot path would have to maintain.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from workflows.models import Event

# The event each write of a run's variables is.
VARIABLES_SET = "run.variables_set"


@dataclass(frozen=True)
class VariableWrite:
    """The last write of one variable: the step that wrote it (``""`` for the run's
    start), its attempt (and fan-out item, if any), when, and how many writes of the
    run's variables there were in all."""

    step: str
    attempt: int | None
    item: str
    at: datetime
    event_id: int


def last_writers(run_id: UUID, variables: dict[str, Any]) -> dict[str, VariableWrite]:
    """Each variable of ``variables`` (the run's, top level) → the last write that set it
    (a patch naming the key), in the order the writes committed. One query; none for a
    run without variables."""
    if not variables:
        return {}
    writers: dict[str, VariableWrite] = {}
    events = Event.objects.filter(run_id=run_id, type=VARIABLES_SET).order_by("id")
    for event_id, payload, at in events.values_list("id", "payload", "created_at"):
        write = VariableWrite(
            step=payload.get("step") or "",
            attempt=payload.get("attempt"),
            item=payload.get("item") or "",
            at=at,
            event_id=event_id,
        )
        for patch in payload.get("patches", ()):
            for name in patch:
                writers[name] = write
    return {name: writers[name] for name in variables if name in writers}
