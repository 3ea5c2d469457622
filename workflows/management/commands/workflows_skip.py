"""Skip a step: record it as done without running it."""

from __future__ import annotations

from typing import Any

from workflows.management.arguments import acting_user, json_value
from workflows.management.options import argument, json_option, user_option
from workflows.management.step_verb import StepVerbCommand
from workflows.models import Step
from workflows.permissions import OVERRIDE_GATE_RULE
from workflows.services import skip_step


class Command(StepVerbCommand):
    help = (
        "Record step STEP as completed with the given output without running it, so its "
        "run moves on (a failed run resumes). Accepts steps not yet finished and failed or "
        "timed-out ones; refused (exit status 1) otherwise. Skipping a gate decides it: it "
        "needs --user U whom the gate's rule admits (or who holds "
        f"{OVERRIDE_GATE_RULE}, recorded as an override), and --output is then the "
        'decision, e.g. \'{"decision": "approved", "selections": ["express"]}\'.'
    )

    arguments = (
        argument("step_id", metavar="STEP", help="the step's id (an integer)"),
        argument(
            "--output",
            type=json_value,
            metavar="JSON",
            help=(
                "the step's output as any JSON value, seen by later steps (default: null); "
                'for a gate, {"decision", "selections", "feedback"} (default: approved, '
                "nothing selected)"
            ),
        ),
        user_option(
            "username recorded in the run's history as the skipper; required for a gate, "
            "whose rule it must meet"
        ),
        json_option("the step"),
    )

    def apply(self, step: Step, options: dict[str, Any]) -> Step:
        user = acting_user(options["user"], "skip_step")
        return skip_step(step, user=user, output=options["output"])
