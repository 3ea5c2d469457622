"""Pause a run: nothing new starts until it is resumed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.options import reason_option
from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import pause_run

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Pause run RUN (its id, a unique id prefix, or --business-key): no new step, item "
        "or compensation starts; work already running finishes and is recorded; timers "
        "that come due wait and fire once after workflows_resume. Refused (exit status 1) "
        "unless the run is pending, running or waiting."
    )

    verb = "pause"
    acted_as = "who paused it"

    verb_arguments = (reason_option("why, kept on the run"),)

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        return pause_run(run, reason=options["reason"], user=user)
