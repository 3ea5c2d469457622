"""Rerun a finished run from one of its steps."""

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
from workflows.services import rerun_from


class Command(BaseCommand):
    help = (
        "Rerun run RUN (its id, a unique id prefix, or --business-key) from step --from: "
        "that step and everything downstream of it run again with new idempotency keys "
        "and fresh attempts; upstream outputs are kept. For failed, completed and "
        "cancelled runs. Refused (exit status 1), with the reason, when an upstream did not "
        "complete, another step failed too, or a reset step's work was never compensated."
    )

    def add_arguments(self, parser: Any) -> None:
        add_run_arguments(parser)
        parser.add_argument(
            "--from", dest="from_step", required=True, metavar="STEP", help="the step's name or id"
        )
        parser.add_argument("--reason", default="", metavar="TEXT", help="why, kept in history")
        parser.add_argument("--user", metavar="U", help="username recorded as who reran it")
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = run_from_options(options)
            rerun = rerun_from(
                run,
                options["from_step"],
                reason=options["reason"],
                user=user_named(options["user"]),
            )
        summary = run_summary(rerun)
        self.stdout.write(to_json(summary) if options["json"] else run_line(summary))
