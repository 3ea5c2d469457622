"""Runs by their deadline: those near it (or past it and not over yet), and those past it.

One predicate for every list that asks (the console's runs filter, the API's
``near_deadline``), so that "near its deadline" means the same everywhere. Each reads
a partial index: runs near their deadline that of the live runs with a deadline
(``workflows_run_live_deadline``), runs past it that of every run with a deadline
(``workflows_run_deadline``), so each costs what those runs cost, whatever the
table's size (a year of ended runs with deadlines is not read to find the live ones).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import BooleanField, F, Func, Q, QuerySet
from django.utils import timezone

from workflows.models import Run
from workflows.status import RUN_FINAL

# The console's choices: a window before the deadline, or the deadline passed.
DEADLINE_WINDOWS: dict[str, timedelta] = {
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
}


def near_deadline(within: timedelta, now: datetime | None = None) -> Q:
    """Runs not over whose deadline falls within ``within`` from ``now`` (default this
    host's clock), or has passed already: what must end soon, or should have."""
    moment = (now or timezone.now()) + within
    return Q(deadline__isnull=False, deadline__lte=moment) & Q(_NotFinal(F("status")))


class _NotFinal(Func):
    """``NOT (status IN ('cancelled', ...))`` with the final statuses sorted and written
    into the statement, as the live-deadline index's condition has them: a database
    uses a partial index only for a query whose condition it can see implies the
    index's, and SQLite does not see it through bound parameters (it read every run
    that ever had a deadline instead of the live ones)."""

    conditional = True
    output_field = BooleanField()
    # Constants of the code (lowercase words), never input: safe to write out.
    template = "NOT (%(expressions)s IN ({}))".format(
        ", ".join(f"'{status!s}'" for status in sorted(RUN_FINAL))
    )


def deadline_passed(now: datetime | None = None) -> Q:
    """Runs whose deadline has passed, over or not (those it failed are among them).

    ``deadline <= now`` alone, without ``deadline IS NOT NULL``, which it implies (a
    comparison with NULL is never true; both databases see that it implies the partial
    index's condition): PostgreSQL multiplied the two conditions' selectivities, took
    the 21,000 runs of a million whose deadline passed for 420, and read and sorted them
    all through the deadline index to show 50, instead of walking the runs newest first."""
    return Q(deadline__lte=now or timezone.now())


def runs_near_deadline(
    within: timedelta, *, now: datetime | None = None, runs: QuerySet[Run] | None = None
) -> QuerySet[Run]:
    """The runs (of ``runs``, default all) :func:`near_deadline` selects."""
    return (Run.objects.all() if runs is None else runs).filter(near_deadline(within, now))
