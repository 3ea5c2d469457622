"""Terminate a run: stop it at once, without compensation."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.management.arguments import (
    add_run_arguments,
    refusals_as_command_errors,
    run_from_options,
    user_named,
)
from workflows.management.output import run_line, to_json
from workflows.queries import run_summary
from workflows.services import terminate_run


class Command(BaseCommand):
    help = (
        "Terminate run RUN (its id, a unique id prefix, or --business-key) and its child "
        "runs: unstarted work is cancelled, running attempts lose their lease (their late "
        "results are rejected), compensations that have not run are skipped, and the run "
        "ends terminated. Use workflows_cancel to stop a run and compensate instead. "
        "Refused (exit status 1) for a run that already ended."
    )

    def add_arguments(self, parser: Any) -> None:
        add_run_arguments(parser)
        parser.add_argument(
            "--reason", default="", metavar="TEXT", help="why, kept as the run's error message"
        )
        parser.add_argument("--user", metavar="U", help="username recorded as who terminated it")
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = run_from_options(options)
            terminated = terminate_run(
                run, reason=options["reason"], user=user_named(options["user"])
            )
        summary = run_summary(terminated)
        self.stdout.write(to_json(summary) if options["json"] else run_line(summary))
