"""Delete finished runs (with their steps and history) older than a number of days."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from workflows.management.output import to_json
from workflows.workers.scanners import purge_finished_runs

_EARLIEST = datetime.min.replace(tzinfo=UTC)


def positive_days(value: str) -> float:
    """argparse type of ``--older-than``: a positive number of days.

    Refused up front too: a number so large that the cut-off date would fall before
    year 1, where the purge could not compute it.
    """
    try:
        days = float(value)
        valid = days > 0 and timedelta(days=days) < timezone.now() - _EARLIEST
    except (ValueError, OverflowError):
        valid = False
    if not valid:
        raise argparse.ArgumentTypeError(
            f"DAYS must be a positive number reaching no further back than year 1, got {value!r}"
        )
    return days


class Command(BaseCommand):
    help = (
        "Delete finished top-level runs (completed, failed, cancelled, ...) that finished "
        "more than DAYS days ago, with their steps, timers, child runs and history. Active "
        "runs are never deleted."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--older-than",
            type=positive_days,
            required=True,
            metavar="DAYS",
            help="age in days since the run finished; fractions allowed (0.5 = 12 hours)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count the runs that would go, delete nothing"
        )
        parser.add_argument("--json", action="store_true", help="print the counts as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["older_than"]
        result = purge_finished_runs(older_than=timedelta(days=days), dry_run=options["dry_run"])
        if options["json"]:
            self.stdout.write(to_json(result))
        elif options["dry_run"]:
            self.stdout.write(f"would delete {result.found} run(s) finished over {days:g} days ago")
        else:
            self.stdout.write(
                f"deleted {result.done} of {result.found} run(s) finished over {days:g} days ago"
            )
