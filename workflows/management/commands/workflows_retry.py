"""Replay an ended run, or retry one failed step of it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.management.arguments import (
    DEADLINE_HELP,
    acting_user,
    add_run_arguments,
    deadline_value,
    refusals_as_command_errors,
    run_from_options,
)
from workflows.management.output import run_line, step_line, to_json
from workflows.queries import get_step, run_summary, step_summary
from workflows.services import retry_run, retry_step


class Command(BaseCommand):
    help = (
        "Retry run RUN (its id, a unique id prefix, or --business-key) that ended failed, "
        "cancelled, terminated, compensated or compensation_failed: failed, timed-out and "
        "cut-short steps get fresh attempts, compensated steps and all after them run again "
        "with new idempotency keys, or failed compensations run again; or with --step only "
        "the failed step STEP. The run resumes, its old error and deadline cleared "
        "(--deadline: a new one). Prints the new status. Refused (exit status 1), with the "
        "reason, for a run not ended or completed (rerun it), and where the retry would "
        "redo work whose compensation never ran."
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
            "--deadline",
            type=deadline_value,
            metavar="DEADLINE",
            help="a new deadline for the retried run: " + DEADLINE_HELP,
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
        if options["step_id"] is not None and options["deadline"] is not None:
            raise CommandError("argument --deadline: not allowed with argument --step")
        with refusals_as_command_errors():
            verb = "retry" if options["step_id"] is None else "retry_step"
            user = acting_user(options["user"], verb)
            if options["step_id"] is not None:
                summary = step_summary(retry_step(get_step(options["step_id"]), user=user))
                line = step_line(summary)
            else:
                run = retry_run(run_from_options(options), user=user, deadline=options["deadline"])
                summary = run_summary(run)
                line = run_line(summary)
        self.stdout.write(to_json(summary) if options["json"] else line)
