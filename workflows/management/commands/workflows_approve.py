"""Approve a waiting gate as a named user."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.management.arguments import named_acting_user, refusals_as_command_errors
from workflows.management.output import step_line, to_json
from workflows.queries import get_step, step_summary
from workflows.services import approve_gate


class Command(BaseCommand):
    help = (
        "Approve the waiting gate STEP as user U, with the options U selects, and print the "
        "gate's new status; the run then moves on. Refused (exit status 1) when the gate "
        "is no longer waiting, U may not decide it, or the selections do not fit its options."
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
            "--select",
            action="extend",
            nargs="+",
            default=[],
            metavar="V",
            help="value of a gate option to select; repeat it (or list several) for more",
        )
        parser.add_argument(
            "--feedback", default="", metavar="TEXT", help="a note kept with the decision"
        )
        parser.add_argument("--json", action="store_true", help="print the decided step as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            gate = get_step(options["step_id"])
            step = approve_gate(
                gate,
                user=named_acting_user(options["user"], "approve"),
                selections=options["select"],
                feedback=options["feedback"],
            )
        summary = step_summary(step)
        if options["json"]:
            self.stdout.write(to_json(summary))
        elif step.selections:
            self.stdout.write(f"{step_line(summary)}; selected {', '.join(step.selections)}")
        else:
            self.stdout.write(step_line(summary))
