"""The frame of a command that applies one verb to one step and prints the step; the gate
decisions (approve, reject) on top of it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from django.core.management.base import CommandParser

from workflows.management.arguments import named_acting_user
from workflows.management.base import OperatorCommand
from workflows.management.options import (
    Argument,
    Declaration,
    add_all,
    argument,
    json_option,
    user_option,
)
from workflows.management.output import step_line
from workflows.models import Step
from workflows.queries import get_step, step_summary

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

GATE_STEP = argument("step_id", metavar="STEP", help="the gate step's id (an integer)")


def gate_user_option(role: str) -> Argument:
    """``--user U``, required: who decides or claims a gate, held to the gate's rule."""
    return user_option(
        f"username of the {role}; needs the gate's permission or to be an assignee", required=True
    )


class StepVerbCommand(OperatorCommand[Step], ABC):
    """Finds the step ``STEP`` (``options["step_id"]``) names, applies the verb to it
    (:meth:`apply`) and prints the step as it is then."""

    @abstractmethod
    def apply(self, step: Step, options: dict[str, Any]) -> Step:
        """Call the verb's service function for ``step``; return the step."""

    def call(self, options: dict[str, Any]) -> Step:
        return self.apply(get_step(options["step_id"]), options)

    def as_json(self, result: Step) -> dict[str, Any]:
        return step_summary(result)

    def text(self, result: Step) -> str:
        return step_line(step_summary(result))


class GateDecisionCommand(StepVerbCommand, ABC):
    """Decides the waiting gate STEP as the required ``--user``: a subclass names its
    ``verb`` (a key of :mod:`workflows.services.access`), what ``--feedback`` is for, the
    options of its own, and calls its service function in :meth:`decide`."""

    verb: str
    decided: str  # the decision in words: "approved", "rejected"
    feedback_help: str
    decision_arguments: ClassVar[tuple[Declaration, ...]] = ()
    # The gate as it was decided: its round and the decider's username (set by apply).
    decided_in: tuple[int, str] | None = None

    @abstractmethod
    def decide(self, gate: Step, user: AnyUser, options: dict[str, Any]) -> Step:
        """Decide ``gate`` as ``user``; return the step."""

    def add_arguments(self, parser: CommandParser) -> None:
        add_all(
            parser,
            (
                GATE_STEP,
                gate_user_option("decider"),
                *self.decision_arguments,
                argument("--feedback", default="", metavar="TEXT", help=self.feedback_help),
                json_option("the decided step"),
            ),
        )

    def apply(self, step: Step, options: dict[str, Any]) -> Step:
        self.decided_in = (step.iteration, options["user"])
        return self.decide(step, named_acting_user(options["user"], self.verb), options)

    def text(self, result: Step) -> str:
        """The step line; when a loop went back over the gate in the same transition,
        its row holds the next round, undecided (``pending``), so the line says the
        decision made and the round that follows instead."""
        if result.decision or self.decided_in is None:
            return super().text(result)
        round_decided, decider = self.decided_in
        summary = step_summary(result)
        return (
            f"step {summary['id']} {summary['name']!r} ({summary['kind']}) of run "
            f"{summary['run']}: {self.decided} by {decider} in round {round_decided}; a loop "
            f"went back over it, so it is {summary['status']} in round {result.iteration}"
        )
