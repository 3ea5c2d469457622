"""List the newest runs, optionally of one workflow and in one status."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand

from workflows.management.output import table, to_json
from workflows.queries import list_runs
from workflows.status import RunStatus

COLUMNS = {
    "id": "ID",
    "workflow": "WORKFLOW",
    "version": "VERSION",
    "status": "STATUS",
    "business_key": "BUSINESS KEY",
    "created_at": "CREATED",
    "updated_at": "UPDATED",
}


def positive_int(value: str) -> int:
    """argparse type of ``--limit``: zero rows is never what an operator asks for."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return number


class Command(BaseCommand):
    help = "List runs, newest first: id, workflow, version, status, business key, times."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--workflow", metavar="NAME", help="only runs of this workflow")
        parser.add_argument(
            "--status",
            choices=RunStatus.values,
            metavar="STATUS",
            help=f"only runs in this status: {', '.join(RunStatus.values)}",
        )
        parser.add_argument(
            "--limit",
            type=positive_int,
            default=50,
            metavar="N",
            help="show at most N runs (default: %(default)s)",
        )
        parser.add_argument("--json", action="store_true", help="print the runs as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        runs = list_runs(
            workflow=options["workflow"], status=options["status"], limit=options["limit"]
        )
        if options["json"]:
            self.stdout.write(to_json(runs))
        elif runs:
            self.stdout.write(
                table(COLUMNS.values(), ([run[key] for key in COLUMNS] for run in runs))
            )
        else:
            self.stdout.write("no runs match")
