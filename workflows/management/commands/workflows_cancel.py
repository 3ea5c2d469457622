"""Cancel a running or waiting run."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.management.arguments import refusals_as_command_errors, user_named
from workflows.management.output import run_line, to_json
from workflows.queries import get_run, run_summary
from workflows.services import cancel_run


class Command(BaseCommand):
    help = (
        "Cancel run RUN and its child runs: waiting work is cancelled, the compensations "
        "of completed steps run in reverse order, and the run ends cancelled. Prints the "
        "run's new status. Refused (exit status 1) unless the run is pending, running or waiting."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("run_id", metavar="RUN", help="the run's id (a UUID)")
        parser.add_argument(
            "--reason", default="", metavar="TEXT", help="why, kept as the run's error message"
        )
        parser.add_argument(
            "--no-compensate",
            dest="compensate",
            action="store_false",
            help="end the run without running its compensations",
        )
        parser.add_argument(
            "--user", metavar="U", help="username recorded in the run's history as the canceller"
        )
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = get_run(options["run_id"])
            cancelled = cancel_run(
                run,
                reason=options["reason"],
                compensate=options["compensate"],
                user=user_named(options["user"]),
            )
        summary = run_summary(cancelled)
        self.stdout.write(to_json(summary) if options["json"] else run_line(summary))
