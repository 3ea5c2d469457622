"""Retry a failed run, or one failed step of it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.management.arguments import (
    acting_user,
    add_run_arguments,
    refusals_as_command_errors,
    run_from_options,
)
from workflows.management.output import run_line, step_line, to_json
from workflows.queries import get_step, run_summary, step_summary
from workflows.services import retry_run, retry_step


class Command(BaseCommand):
    help = (
        "Retry failed run RUN (its id, a unique id prefix, or --business-key): every failed "
        "or timed-out step gets fresh attempts, or failed compensations run again; or with "
        "--step only the failed step STEP. The run resumes. Prints the new status. Refused "
        "(exit status 1) when nothing has failed."
    )

    def add_arguments(self, parser: Any) -> None:
        add_run_arguments(parser)
        parser.add_argument(
            "--step", dest="step_id", metavar="STEP", help="retry only this failed step (its id)"
        )
        parser.add_argument(
            "--user", metavar="U", help="username recorded in the run's history as the retrier"
        )
        parser.add_argument(
            "--json", action="store_true", help="print the run (or with --step, the step) as JSON"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        names_run = options["run_id"] is not None or options["business_key"] is not None
        if options["step_id"] is None and not names_run:
            raise CommandError("one of the arguments RUN --step is required (or --business-key)")
        if options["step_id"] is not None and names_run:
            raise CommandError("argument --step: not allowed with argument RUN or --business-key")
        with refusals_as_command_errors():
            verb = "retry" if options["step_id"] is None else "retry_step"
            user = acting_user(options["user"], verb)
            if options["step_id"] is not None:
                summary = step_summary(retry_step(get_step(options["step_id"]), user=user))
                line = step_line(summary)
            else:
                summary = run_summary(retry_run(run_from_options(options), user=user))
                line = run_line(summary)
        self.stdout.write(to_json(summary) if options["json"] else line)
