"""Claim a waiting gate for a named user, or release the claim."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.management.arguments import named_acting_user, refusals_as_command_errors
from workflows.management.output import step_line, to_json
from workflows.permissions import OVERRIDE_GATE_CLAIM
from workflows.queries import get_step, step_summary
from workflows.services import claim_gate, unclaim_gate


class Command(BaseCommand):
    help = (
        "Claim the waiting gate STEP for user U, so that others may not decide it, or with "
        "--release give the claim up; print who holds the gate now. Refused (exit status "
        "1) when the gate is no longer waiting, someone else holds it (releasing another "
        f"user's claim needs the permission {OVERRIDE_GATE_CLAIM}), or U may not "
        "decide it."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("step_id", metavar="STEP", help="the gate step's id (an integer)")
        parser.add_argument(
            "--user",
            required=True,
            metavar="U",
            help="username of the claimer; needs the gate's permission or to be an assignee",
        )
        parser.add_argument(
            "--release", action="store_true", help="release the claim instead of taking it"
        )
        parser.add_argument("--json", action="store_true", help="print the gate as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        verb = unclaim_gate if options["release"] else claim_gate
        with refusals_as_command_errors():
            gate = get_step(options["step_id"])
            step = verb(
                gate,
                named_acting_user(options["user"], "release" if options["release"] else "claim"),
            )
        claimer = step.claimed_by.get_username() if step.claimed_by is not None else None
        summary = {**step_summary(step), "claimed_by": claimer, "claimed_at": step.claimed_at}
        if options["json"]:
            self.stdout.write(to_json(summary))
        else:
            claim = f"claimed by {claimer}" if claimer else "unclaimed"
            self.stdout.write(f"{step_line(summary)}, {claim}")
