"""Delete finished runs (with their steps and history) older than a number of days."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from workflows.management.arguments import positive_days
from workflows.management.base import DeclaredCommand
from workflows.management.options import argument, dry_run_option, json_option
from workflows.management.output import to_json
from workflows.workers.scanners import purge_finished_runs


class Command(DeclaredCommand):
    help = (
        "Delete finished top-level runs (completed, failed, cancelled, ...) that finished "
        "more than DAYS days ago, with their steps, timers, child runs and history. Active "
        "runs are never deleted."
    )

    arguments = (
        argument(
            "--older-than",
            type=positive_days,
            required=True,
            metavar="DAYS",
            help="age in days since the run finished; fractions allowed (0.5 = 12 hours)",
        ),
        dry_run_option("count the runs that would go, delete nothing"),
        json_option("the counts"),
    )

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
