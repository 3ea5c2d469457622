"""What holds a run as a whole before or between its steps: a pause, a place in its
workflow's queue. (A flow member's ``blocked`` hold is told by
:mod:`~workflows.queries.explain.flow_place`.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workflows.definitions import registry
from workflows.errors import DefinitionMissing
from workflows.holds import HoldKind
from workflows.models import Run
from workflows.queries.explain.records import WaitingOn
from workflows.status import RunStatus

if TYPE_CHECKING:
    from workflows.queries.explain.reads import ExplainedRun

__all__ = ["paused", "queued"]


def paused(run: ExplainedRun) -> list[WaitingOn]:
    if run.status != RunStatus.PAUSED:
        return []
    details = {"reason": run.paused_reason, "by": run.paused_by, "at": run.paused_at}
    return [WaitingOn(HoldKind.PAUSED, None, details)]


def queued(run: ExplainedRun) -> list[WaitingOn]:
    """A run waiting for a place under its workflow's ``max_concurrent_runs``."""
    if run.status != RunStatus.QUEUED:
        return []
    limit = _max_concurrent_runs(run)
    ahead = run.queued_ahead or 0
    runs = "run" if ahead == 1 else "runs"
    limit_text = f" (max_concurrent_runs {limit})" if limit is not None else ""
    return [
        WaitingOn(
            HoldKind.QUEUED,
            None,
            {
                "workflow": run.workflow_name,
                "ahead": ahead,
                "max_concurrent_runs": limit,
                "message": (
                    f"queued behind {ahead} earlier {runs} of workflow "
                    f"{run.workflow_name}{limit_text}"
                ),
            },
        )
    ]


def _max_concurrent_runs(run: Run) -> int | None:
    """The latest registered version's limit (the one admission applies), else the
    run's snapshot's."""
    try:
        return registry.latest(run.workflow_name).max_concurrent_runs
    except DefinitionMissing:
        return (run.snapshot or {}).get("max_concurrent_runs")
