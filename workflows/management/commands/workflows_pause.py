"""Pause a run: nothing new starts until it is resumed."""

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
from workflows.services import pause_run


class Command(BaseCommand):
    help = (
        "Pause run RUN (its id, a unique id prefix, or --business-key): no new step, item "
        "or compensation starts; work already running finishes and is recorded; timers "
        "that come due wait and fire once after workflows_resume. Refused (exit status 1) "
        "unless the run is pending, running or waiting."
    )

    def add_arguments(self, parser: Any) -> None:
        add_run_arguments(parser)
        parser.add_argument("--reason", default="", metavar="TEXT", help="why, kept on the run")
        parser.add_argument("--user", metavar="U", help="username recorded as who paused it")
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = run_from_options(options)
            paused = pause_run(run, reason=options["reason"], user=user_named(options["user"]))
        summary = run_summary(paused)
        self.stdout.write(to_json(summary) if options["json"] else run_line(summary))
