"""Hand ready work to the configured executor from inside the transition.

The ``ready`` row is the durable record of the work; the executor's message is only a
nudge. Executors decide whether to send inside the transaction (a queue on the same
database commits with it) or on commit (any other queue).
"""

from __future__ import annotations

from collections.abc import Sequence

from workflows.engine.executor import Work, get_executor


def enqueue(work: Sequence[Work]) -> None:
    """Send ``(kind, id)`` pairs, each kind a :class:`~workflows.engine.work_kinds.WorkKind`."""
    if work:
        get_executor().enqueue(list(work))
