"""Rerun an ended run from one of its steps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.options import argument, deadline_option, reason_option
from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import rerun_from

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Rerun run RUN (its id, a unique id prefix, or --business-key) from step --from: "
        "that step and everything downstream of it run again with new idempotency keys "
        "and fresh attempts; upstream outputs are kept, the old error and deadline cleared "
        "(--deadline: a new one). For every ended run. Refused (exit status 1), with the "
        "reason, when an upstream did not complete, another step failed too, a reset step's "
        "work was never compensated, a step left out of the reset was compensated, or a "
        "compensation failed (retry the run first)."
    )

    verb = "rerun"
    acted_as = "who reran it"

    verb_arguments = (
        argument(
            "--from", dest="from_step", required=True, metavar="STEP", help="the step's name or id"
        ),
        reason_option("why, kept in history"),
        deadline_option("a new deadline for the rerun run: "),
    )

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        return rerun_from(
            run,
            options["from_step"],
            reason=options["reason"],
            user=user,
            deadline=options["deadline"],
        )
