"""Cancel a running or waiting run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import cancel_run

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Cancel run RUN (its id, a unique id prefix, or --business-key) and its child runs: "
        "waiting work is cancelled, the compensations of completed steps run in reverse "
        "order, and the run ends cancelled. Prints the run's new status. Refused (exit "
        "status 1) unless the run is pending, running or waiting."
    )

    verb = "cancel"
    acted_as = "the canceller in the run's history"

    def add_verb_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--reason", default="", metavar="TEXT", help="why, kept as the run's error message"
        )
        parser.add_argument(
            "--no-compensate",
            dest="compensate",
            action="store_false",
            help="end the run without running its compensations",
        )

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        return cancel_run(
            run, reason=options["reason"], compensate=options["compensate"], user=user
        )
