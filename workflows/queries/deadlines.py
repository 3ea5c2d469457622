"""Runs by their deadline: those near it (or past it and not over yet), and those past it.

One predicate for every list that asks (the console's runs filter, the API's
``near_deadline``), so that "near its deadline" means the same everywhere. Each reads
a partial index: runs near their deadline that of the live runs with a deadline
(``workflows_run_live_deadline``), runs past it that of every run with a deadline
(``workflows_run_deadline``; on SQLite, in creation order), so each costs what those
runs cost, whatever the table's size (a year of ended runs with deadlines is not read
to find the live ones).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connections, router
from django.db.models import DateTimeField, Q, QuerySet
from django.db.models.lookups import LessThanOrEqual
from django.utils import timezone

from workflows.models import Run
from workflows.queries.plan_terms import StatusIn, Unindexed
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
    # The final statuses written out, as the live-deadline index's condition has them
    # (queries/plan_terms): bound as parameters, SQLite did not see that the
    # index serves and read every run that ever had a deadline instead of the live ones.
    return Q(deadline__isnull=False, deadline__lte=moment) & Q(StatusIn(RUN_FINAL, negated=True))


def deadline_passed(now: datetime | None = None) -> Q:
    """Runs whose deadline has passed, over or not (those it failed are among them).

    On PostgreSQL ``deadline <= now`` alone, without ``deadline IS NOT NULL``, which it
    implies (a comparison with NULL is never true; the planner sees that it implies the
    partial index's condition): with both, PostgreSQL multiplied the two conditions'
    selectivities, took the 21,000 runs of a million whose deadline passed for 420, and
    read and sorted them all through the deadline index to show 50, instead of walking
    the runs newest first.

    On SQLite the moment is compared on each run read, not used to read runs by their
    deadline: most runs with a deadline are past it, which SQLite cannot tell, and it
    read them all by that index to sort them (0.4 s at a million runs). Compared on
    each, a page newest first walks the runs with a deadline in creation order
    (``workflows_run_deadline_created``, whose condition ``deadline IS NOT NULL`` the
    query repeats) and stops after the page, reading at worst every run with a
    deadline, as "has a deadline" does.
    """
    moment = now or timezone.now()
    if connections[router.db_for_read(Run)].vendor != "sqlite":
        return Q(deadline__lte=moment)
    deadline = Unindexed("deadline", output_field=DateTimeField())
    return Q(deadline__isnull=False) & Q(LessThanOrEqual(deadline, moment))


def runs_near_deadline(
    within: timedelta, *, now: datetime | None = None, runs: QuerySet[Run] | None = None
) -> QuerySet[Run]:
    """The runs (of ``runs``, default all) :func:`near_deadline` selects."""
    return (Run.objects.all() if runs is None else runs).filter(near_deadline(within, now))
