"""Reject a waiting gate as a named user."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.management.arguments import named_acting_user, refusals_as_command_errors
from workflows.management.output import step_line, to_json
from workflows.queries import get_step, step_summary
from workflows.services import reject_gate


class Command(BaseCommand):
    help = (
        "Reject the waiting gate STEP as user U and print the gate's new status. The step "
        "fails and its run fails and compensates, unless the gate continues on rejection. "
        "Refused (exit status 1) when the gate is no longer waiting or U may not decide it."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("step_id", metavar="STEP", help="the gate step's id (an integer)")
        parser.add_argument(
            "--user",
            required=True,
            metavar="U",
            help="username of the decider; needs the gate's permission or to be an assignee",
        )
        parser.add_argument(
            "--feedback", default="", metavar="TEXT", help="why it was rejected, kept with it"
        )
        parser.add_argument("--json", action="store_true", help="print the decided step as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            gate = get_step(options["step_id"])
            step = reject_gate(
                gate,
                user=named_acting_user(options["user"], "reject"),
                feedback=options["feedback"],
            )
        summary = step_summary(step)
        self.stdout.write(to_json(summary) if options["json"] else step_line(summary))
