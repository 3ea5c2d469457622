"""Reject a waiting gate as a named user."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.step_verb import GateDecisionCommand
from workflows.models import Step
from workflows.services import reject_gate

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(GateDecisionCommand):
    help = (
        "Reject the waiting gate STEP as user U and print the gate's new status. The step "
        "fails and its run fails and compensates, unless the gate continues on rejection. "
        "Refused (exit status 1) when the gate is no longer waiting or U may not decide it."
    )

    verb = "reject"
    decided = "rejected"
    feedback_help = "why it was rejected, kept with it"

    def decide(self, gate: Step, user: AnyUser, options: dict[str, Any]) -> Step:
        return reject_gate(gate, user=user, feedback=options["feedback"])
