"""Delete the history of ended runs before a cutoff, in bounded, resumable batches."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone

from workflows.engine.retention.batches import Batch
from workflows.management.arguments import (
    past_instant,
    positive_days,
    positive_int,
    positive_number,
    refusals_as_command_errors,
)
from workflows.management.base import DeclaredCommand
from workflows.management.options import argument, dry_run_option, json_option
from workflows.management.output import to_json
from workflows.queries.retention import purgeable
from workflows.services.retention import DONE, PurgeReport, purge_history

# The most often a progress line is printed (seconds), whatever the batches' pace.
PROGRESS_EVERY = 1.0


def progress_line(report: PurgeReport) -> str:
    """One line of what a purge did so far."""
    children = f" (+{report.child_runs:,} child)" if report.child_runs else ""
    return (
        f"{report.runs:,} run(s){children} and {report.rows:,} row(s) deleted in "
        f"{report.batches:,} batch(es), {report.runs_per_second:,.0f} runs/s; "
        f"batch time p50 {report.as_dict()['batch_ms_p50']:g} ms, "
        f"max {report.as_dict()['batch_ms_max']:g} ms"
    )


class Command(DeclaredCommand):
    help = (
        "Delete the history of top-level runs that ended (completed, failed, cancelled, ...) "
        "before a cutoff: each with its child runs, steps, items, timers, compensations, "
        "signals and events, and flows whose last member went. Runs still going, and members "
        "of flows still going, are never deleted. Deletes in batches of whole runs, one "
        "transaction each, sized to take about --batch-ms, and prints its progress as it "
        "goes. Resumable: a purge stopped at any point (killed, or at --max-runs or "
        "--time-limit) leaves whole runs, and running it again goes on from the oldest run "
        "left. Give --older-than, --before, or both (the earlier cutoff wins)."
    )

    arguments = (
        argument(
            "--older-than",
            type=positive_days,
            metavar="DAYS",
            help="runs that ended more than DAYS days ago; fractions allowed (0.5 = 12 hours)",
        ),
        argument(
            "--before",
            type=past_instant,
            metavar="DATETIME",
            help="runs that ended before this ISO 8601 instant with its offset "
            "(2026-03-01T00:00:00Z)",
        ),
        dry_run_option("count what would be deleted, delete nothing"),
        argument(
            "--batch-ms",
            type=positive_number,
            metavar="MS",
            help="the time each batch's transaction aims at, in milliseconds "
            "(default: WORKFLOWS['RETENTION_BATCH_MS'], 100)",
        ),
        argument(
            "--max-runs",
            type=positive_int,
            metavar="N",
            help="stop after deleting N top-level runs (run again to go on)",
        ),
        argument(
            "--time-limit",
            type=positive_number,
            metavar="SECONDS",
            help="stop before a batch that would end past SECONDS (run again to go on)",
        ),
        json_option("the totals at the end, without progress lines,"),
    )

    def cutoff(self, options: dict[str, Any]) -> datetime:
        cutoffs = []
        if options["older_than"] is not None:
            cutoffs.append(timezone.now() - timedelta(days=options["older_than"]))
        if options["before"] is not None:
            cutoffs.append(options["before"])
        if not cutoffs:
            raise CommandError(
                "say which runs to delete: --older-than DAYS, --before DATETIME, or both"
            )
        return min(cutoffs)

    def handle(self, *args: Any, **options: Any) -> None:
        before = self.cutoff(options)
        if options["dry_run"]:
            self.dry_run(before, options["json"])
            return
        shown = time.monotonic()

        def on_batch(report: PurgeReport, batch: Batch) -> None:
            nonlocal shown
            if not options["json"] and time.monotonic() - shown >= PROGRESS_EVERY:
                self.stdout.write(progress_line(report))
                shown = time.monotonic()

        limit = options["time_limit"]
        with refusals_as_command_errors():
            report = purge_history(
                before=before,
                batch_ms=options["batch_ms"],
                max_runs=options["max_runs"],
                time_limit=timedelta(seconds=limit) if limit is not None else None,
                on_batch=on_batch,
            )
        if options["json"]:
            self.stdout.write(to_json(report.as_dict()))
            return
        self.stdout.write(progress_line(report))
        self.stdout.write(f"deleted {report.runs:,} run(s) that ended before {before.isoformat()}")
        if report.kept:
            self.stdout.write(
                f"kept {report.kept:,} run(s) read meanwhile: reopened, or a child run still going"
            )
        if report.stopped != DONE:
            self.stdout.write(
                f"stopped at --{report.stopped.replace('_', '-')}; run the same command again "
                "to go on"
            )

    def dry_run(self, before: datetime, as_json: bool) -> None:
        counts = purgeable(before)
        if as_json:
            self.stdout.write(
                to_json({"before": before.isoformat(), "dry_run": True, **counts.__dict__})
            )
            return
        self.stdout.write(
            f"would delete {counts.runs:,} run(s) that ended before {before.isoformat()}, "
            f"with {counts.child_runs:,} child run(s), {counts.steps:,} step(s) and "
            f"{counts.events:,} event(s)"
        )
