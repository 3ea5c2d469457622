"""Replay an ended run, or retry one failed step of it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from workflows.management.arguments import (
    acting_user,
    refusals_as_command_errors,
    run_from_options,
)
from workflows.management.base import DeclaredCommand
from workflows.management.options import (
    RUN_ARGUMENTS,
    argument,
    deadline_option,
    json_option,
    user_option,
)
from workflows.management.output import run_line, step_line, to_json
from workflows.queries import get_step, run_summary, step_summary
from workflows.services import retry_run, retry_step


class Command(DeclaredCommand):
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

    arguments = (
        *RUN_ARGUMENTS,
        argument(
            "--step", dest="step_id", metavar="STEP", help="retry only this failed step (its id)"
        ),
        user_option("username recorded in the run's history as the retrier"),
        deadline_option("a new deadline for the retried run: "),
        json_option("the run (or with --step, the step)"),
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
