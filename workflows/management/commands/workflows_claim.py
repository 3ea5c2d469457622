"""Claim a waiting gate for a named user, or release the claim."""

from __future__ import annotations

from typing import Any

from workflows.management.arguments import named_acting_user
from workflows.management.options import argument, json_option
from workflows.management.output import step_line
from workflows.management.step_verb import GATE_STEP, StepVerbCommand, gate_user_option
from workflows.models import Step
from workflows.permissions import OVERRIDE_GATE_CLAIM
from workflows.queries import step_summary
from workflows.services import claim_gate, unclaim_gate


class Command(StepVerbCommand):
    help = (
        "Claim the waiting gate STEP for user U, so that others may not decide it, or with "
        "--release give the claim up; print who holds the gate now. Refused (exit status "
        "1) when the gate is no longer waiting, someone else holds it (releasing another "
        f"user's claim needs the permission {OVERRIDE_GATE_CLAIM}), or U may not "
        "decide it."
    )

    arguments = (
        GATE_STEP,
        gate_user_option("claimer"),
        argument("--release", action="store_true", help="release the claim instead of taking it"),
        json_option("the gate"),
    )

    def apply(self, step: Step, options: dict[str, Any]) -> Step:
        verb, name = (unclaim_gate, "release") if options["release"] else (claim_gate, "claim")
        return verb(step, named_acting_user(options["user"], name))

    def as_json(self, result: Step) -> dict[str, Any]:
        claimer = result.claimed_by.get_username() if result.claimed_by is not None else None
        return {**step_summary(result), "claimed_by": claimer, "claimed_at": result.claimed_at}

    def text(self, result: Step) -> str:
        summary = self.as_json(result)
        claim = f"claimed by {summary['claimed_by']}" if summary["claimed_by"] else "unclaimed"
        return f"{step_line(summary)}, {claim}"
