"""Hand ready work to the configured executor from inside the transition.

The ``ready`` row is the durable record of the work; the executor's message is only a
nudge. Executors decide whether to send inside the transaction (a queue on the same
database commits with it) or on commit (any other queue). External work
(``Task(external=True)``) is never sent to the executor: no process of it runs such
work. Its claimers, long-polling ``claim_external``, are woken on commit instead
(:func:`external_topic`).
"""

from __future__ import annotations

from collections.abc import Sequence

from workflows.engine.executor import Work, get_executor
from workflows.engine.wakeups import wake


def external_topic(queue: str) -> str:
    """The wake-up topic of external work made ready on ``queue``."""
    return f"external:{queue}"


def enqueue(work: Sequence[Work]) -> None:
    """Send ``(kind, id)`` pairs, each kind a :class:`~workflows.engine.work_kinds.WorkKind`."""
    if not work:
        return
    in_process = [unit for unit in work if not unit.route.external]
    if len(in_process) < len(work):
        wake(*{external_topic(unit.route.queue) for unit in work if unit.route.external})
    if in_process:
        get_executor().enqueue(in_process)
