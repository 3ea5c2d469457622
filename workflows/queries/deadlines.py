"""Runs by their deadline: those near it (or past it and not over yet), and those past it.

One predicate for every list that asks (the console's runs filter, the API's
``near_deadline``), so that "near its deadline" means the same everywhere. Each reads
the partial index of runs with a deadline (``workflows_run_deadline``), which holds only
those runs, so it costs what the few runs with a deadline cost, whatever the table's size.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q, QuerySet
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
    return Q(deadline__isnull=False, deadline__lte=moment) & ~Q(status__in=RUN_FINAL)


def deadline_passed(now: datetime | None = None) -> Q:
    """Runs whose deadline has passed, over or not (those it failed are among them)."""
    return Q(deadline__isnull=False, deadline__lte=now or timezone.now())


def runs_near_deadline(
    within: timedelta, *, now: datetime | None = None, runs: QuerySet[Run] | None = None
) -> QuerySet[Run]:
    """The runs (of ``runs``, default all) :func:`near_deadline` selects."""
    return (Run.objects.all() if runs is None else runs).filter(near_deadline(within, now))
