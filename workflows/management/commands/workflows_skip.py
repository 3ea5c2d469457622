"""Skip a step: record it as done without running it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.management.arguments import acting_user, json_value, refusals_as_command_errors
from workflows.management.output import step_line, to_json
from workflows.permissions import OVERRIDE_GATE_RULE
from workflows.queries import get_step, step_summary
from workflows.services import skip_step


class Command(BaseCommand):
    help = (
        "Record step STEP as completed with the given output without running it, so its "
        "run moves on (a failed run resumes). Accepts steps not yet finished and failed or "
        "timed-out ones; refused (exit status 1) otherwise. Skipping a gate decides it: it "
        "needs --user U whom the gate's rule admits (or who holds "
        f"{OVERRIDE_GATE_RULE}, recorded as an override), and --output is then the "
        'decision, e.g. \'{"decision": "approved", "selections": ["express"]}\'.'
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("step_id", metavar="STEP", help="the step's id (an integer)")
        parser.add_argument(
            "--output",
            type=json_value,
            metavar="JSON",
            help=(
                "the step's output as any JSON value, seen by later steps (default: null); "
                'for a gate, {"decision", "selections", "feedback"} (default: approved, '
                "nothing selected)"
            ),
        )
        parser.add_argument(
            "--user",
            metavar="U",
            help=(
                "username recorded in the run's history as the skipper; required for a gate, "
                "whose rule it must meet"
            ),
        )
        parser.add_argument("--json", action="store_true", help="print the step as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            step = get_step(options["step_id"])
            skipped = skip_step(
                step, user=acting_user(options["user"], "skip_step"), output=options["output"]
            )
        summary = step_summary(skipped)
        self.stdout.write(to_json(summary) if options["json"] else step_line(summary))
