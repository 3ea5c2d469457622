"""Plain django-q2 tasks for the queue-alone baseline of ``bench/workers.py``.

They go through the same cluster as Flowsite's steps but bypass the engine, so the
difference between the two figures is what the engine adds (or saves, by chaining).
"""

from __future__ import annotations

import time


def noop() -> None:
    """Do nothing: one queue round trip and nothing else."""
    return None


def hop(remaining: int, group: str) -> float:
    """Enqueue the next hop of a chain (each task sends the next), return when this ran."""
    ran_at = time.time()
    if remaining > 1:
        from django_q.tasks import async_task

        async_task("bench.benchapp.tasks.hop", remaining - 1, group, group=group, save=True)
    return ran_at
