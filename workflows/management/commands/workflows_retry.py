"""Retry a failed run, or one failed step of it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.management.arguments import refusals_as_command_errors, user_named
from workflows.management.output import run_line, step_line, to_json
from workflows.queries import get_run, get_step, run_summary, step_summary
from workflows.services import retry_run, retry_step


class Command(BaseCommand):
    help = (
        "Retry failed run RUN (every failed or timed-out step gets fresh attempts, or failed "
        "compensations run again), or with --step only the failed step STEP; the run "
        "resumes. Prints the new status. Refused (exit status 1) when nothing has failed."
    )

    def add_arguments(self, parser: Any) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("run_id", nargs="?", metavar="RUN", help="the failed run's id (a UUID)")
        target.add_argument(
            "--step", dest="step_id", metavar="STEP", help="retry only this failed step (its id)"
        )
        parser.add_argument(
            "--user", metavar="U", help="username recorded in the run's history as the retrier"
        )
        parser.add_argument(
            "--json", action="store_true", help="print the run (or with --step, the step) as JSON"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            user = user_named(options["user"])
            if options["step_id"] is not None:
                summary = step_summary(retry_step(get_step(options["step_id"]), user=user))
                line = step_line(summary)
            else:
                summary = run_summary(retry_run(get_run(options["run_id"]), user=user))
                line = run_line(summary)
        self.stdout.write(to_json(summary) if options["json"] else line)
