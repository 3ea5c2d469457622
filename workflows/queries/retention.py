"""What a purge would delete, counted without deleting (``workflows_purge --dry-run``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workflows.engine.retention.batches import ended_runs
from workflows.models import Event, Run, Step


@dataclass(frozen=True)
class Purgeable:
    """The top-level runs ended before a cutoff, and the child runs, steps and events
    that go with them (child runs' own steps and events are not counted)."""

    runs: int
    child_runs: int
    steps: int
    events: int


def purgeable(before: datetime) -> Purgeable:
    """Count what a purge with cutoff ``before`` would delete now: four counts, each
    through the index that leads with the run. Runs kept at the delete (a child run
    still going) are counted too."""
    runs = ended_runs(before).values("id")
    return Purgeable(
        runs=runs.count(),
        child_runs=Run.objects.filter(parent_run__in=runs).count(),
        steps=Step.objects.filter(run__in=runs).count(),
        events=Event.objects.filter(run__in=runs).count(),
    )
