"""Waiting for a run's result: block until it reaches a final status, woken on commit."""

from __future__ import annotations

from uuid import UUID

from workflows.errors import WaitTimeout
from workflows.models import Run
from workflows.queries.long_poll import long_poll
from workflows.queries.runs import get_run
from workflows.status import RUN_FINAL


def run_topic(run_id: UUID | str) -> str:
    """The wake-up topic of a run's events (a final status is one)."""
    return f"run:{run_id}"


def wait_for_run(run: Run | UUID | str, timeout: float) -> Run:
    """The run (as :func:`~workflows.queries.get_run` returns it) as soon as it is in a
    final status, or after ``timeout`` seconds as it is then; :class:`RunNotFound` for
    an unknown id. What the API's ``GET /api/runs/{id}/?wait=S`` answers."""
    found = get_run(run.pk if isinstance(run, Run) else run)
    return long_poll(
        [run_topic(found.pk)],
        lambda: get_run(found.pk),
        until=lambda current: current.status in RUN_FINAL,
        timeout=timeout,
    )


def wait_for(run: Run | UUID | str, timeout: float) -> Run:
    """Return the run (as :func:`~workflows.queries.get_run` returns it) once it is in a
    final status (``completed``, ``failed``, ``cancelled``, ...); raise
    :class:`~workflows.errors.WaitTimeout` if it is not after ``timeout`` seconds.

    Woken by the commit of the run's events (``NOTIFY`` on PostgreSQL, in-process on
    SQLite, with a short backstop read), holding no transaction while it waits; called
    inside ``atomic()`` it does not wait (see :mod:`workflows.queries.long_poll`).
    """
    current = wait_for_run(run, timeout)
    if current.status not in RUN_FINAL:
        raise WaitTimeout(
            f"run {current.pk} is still {current.status} after waiting {timeout:g} s",
            run=str(current.pk),
            status=current.status,
            timeout=timeout,
        )
    return current
