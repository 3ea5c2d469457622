"""Approve a waiting gate as a named user."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.options import argument
from workflows.management.step_verb import GateDecisionCommand
from workflows.models import Step
from workflows.services import approve_gate

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(GateDecisionCommand):
    help = (
        "Approve the waiting gate STEP as user U, with the options U selects, and print the "
        "gate's new status; the run then moves on. Refused (exit status 1) when the gate "
        "is no longer waiting, U may not decide it, or the selections do not fit its options."
    )

    verb = "approve"
    decided = "approved"
    feedback_help = "a note kept with the decision"
    decision_arguments = (
        argument(
            "--select",
            action="extend",
            nargs="+",
            default=[],
            metavar="V",
            help="value of a gate option to select; repeat it (or list several) for more",
        ),
    )

    def decide(self, gate: Step, user: AnyUser, options: dict[str, Any]) -> Step:
        return approve_gate(
            gate, user=user, selections=options["select"], feedback=options["feedback"]
        )

    def text(self, result: Step) -> str:
        line = super().text(result)
        return f"{line}; selected {', '.join(result.selections)}" if result.selections else line
