"""Stopping the children of a run that stopped: each child in a transition of its own,
after the parent's has committed.

Lock order is always child, then parent (a child's final transition locks its parent to
report, :mod:`workflows.engine.nodes.subworkflow`), so a parent that stops never locks
its children while it holds its own lock: the service calls these once the parent's
cancel or terminate has committed, and the ``cancel_orphaned_children`` scanner for a
process that died in between.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from uuid import UUID

from workflows.engine.guards import CANCEL
from workflows.engine.verbs.cancel import cancel_run
from workflows.engine.verbs.terminate import terminate_run
from workflows.errors import WorkflowError
from workflows.models import Run
from workflows.status import RUN_ALIVE, RUN_UNWINDING

logger = logging.getLogger("workflows.engine")


def cancel_children(run_id: UUID) -> int:
    """Cancel the children of a run that stopped (each a cancel accepts: running, waiting,
    paused, queued), each in its own transition."""
    return _stop_children(
        run_id, CANCEL.accepts, lambda child_id: cancel_run(child_id, reason="parent run stopped")
    )


def terminate_children(run_id: UUID) -> int:
    """Terminate the unfinished children of a terminated run, and theirs, each in its own
    transition (a child is always locked before its parent, never while it is held)."""

    def terminate(child_id: UUID) -> None:
        terminate_run(child_id, reason="parent run terminated")
        terminate_children(child_id)

    return _stop_children(run_id, RUN_ALIVE | RUN_UNWINDING, terminate)


def _stop_children(run_id: UUID, statuses: frozenset[str], stop: Callable[[UUID], object]) -> int:
    children = Run.objects.filter(parent_run_id=run_id, status__in=statuses)
    stopped = 0
    for child_id in children.values_list("id", flat=True):
        try:
            stop(child_id)
        except WorkflowError as exc:  # the child ended meanwhile
            logger.info(
                "child run %s not stopped: %s", child_id, exc, extra={"run_id": str(child_id)}
            )
        else:
            stopped += 1
    return stopped
