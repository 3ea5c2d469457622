"""Resume a paused run."""

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
from workflows.services import resume_run


class Command(BaseCommand):
    help = (
        "Resume paused run RUN (its id, a unique id prefix, or --business-key): a step that "
        "failed while paused fails the run now; steps whose upstreams finished start; ready "
        "work is dispatched again; timers that came due fire. Refused (exit status 1) unless "
        "the run is paused."
    )

    def add_arguments(self, parser: Any) -> None:
        add_run_arguments(parser)
        parser.add_argument("--user", metavar="U", help="username recorded as who resumed it")
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = run_from_options(options)
            resumed = resume_run(run, user=user_named(options["user"]))
        summary = run_summary(resumed)
        self.stdout.write(to_json(summary) if options["json"] else run_line(summary))
