"""Waiting for a run's next events: ``workflows.wait_for_events``.

A caller that follows a run (a dashboard, ``workflows_tail``, the API's
``/runs/{id}/events/?after_seq=C&wait=S``) asks for the events after the last one it
received and gets them as soon as at least one has committed, or an empty list when
``timeout`` seconds pass. Built on :func:`workflows.queries.long_poll.long_poll`: a
watch of ``run:<id>`` made before the first read, so a commit landing between the read
and the wait still wakes it, and a short backstop poll for a wake-up that was lost.
The events come in commit order (:mod:`workflows.queries.event_cursor`), so following
``after`` from answer to answer never skips one.
"""

from __future__ import annotations

from uuid import UUID

from workflows.errors import InvalidInput
from workflows.models import Event, Run
from workflows.queries.event_cursor import position_of, run_events_after
from workflows.queries.long_poll import long_poll
from workflows.queries.results import run_topic
from workflows.queries.runs import get_run

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "wait_for_events"]

# How many events one answer holds by default, and at most; a caller follows ``after``
# for the rest.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def wait_for_events(
    run: Run | UUID | str,
    after: int | None = None,
    timeout: float = 30.0,
    *,
    limit: int = DEFAULT_LIMIT,
) -> list[Event]:
    """The run's events after the event ``after`` (its id, the ``seq`` the API gives;
    ``None`` or 0: from the start), in commit order, as soon as there is at least one;
    ``[]`` after ``timeout`` seconds (0: answer at once).

    Raises :class:`~workflows.errors.RunNotFound` for an unknown run and
    :class:`~workflows.errors.InvalidInput` (naming ``after_seq``) when ``after`` is not
    an event of this run. Called inside a transaction it reads once and does not wait
    (see :func:`~workflows.queries.long_poll.long_poll`).
    """
    run_id = run.pk if isinstance(run, Run) else get_run(run).pk
    if (
        isinstance(after, bool)
        or not isinstance(after, int | None)
        or not 0 <= (after or 0) < 2**63
    ):
        raise InvalidInput(
            f"after must be the id (seq) of an event of the run, or None; got {after!r}",
            field="after_seq",
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_LIMIT}", field="limit")
    position = position_of(run_id, after or 0)
    return long_poll(
        [run_topic(run_id)],
        lambda: run_events_after(run_id, position, limit),
        until=bool,
        timeout=timeout,
    )
