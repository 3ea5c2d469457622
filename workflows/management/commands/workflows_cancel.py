"""Cancel a running or waiting run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.options import argument, reason_option
from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import request_cancel

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Cancel run RUN (its id, a unique id prefix, or --business-key) and its child runs: "
        "waiting work is cancelled, the compensations of completed steps run in reverse "
        "order, and the run ends cancelled. Prints the run's new status. A run already "
        "cancelling, cancelled or terminated is left as it is and the command says so "
        "(exit status 0); any other ended run is refused (exit status 1)."
    )

    verb = "cancel"
    acted_as = "the canceller in the run's history"

    verb_arguments = (
        reason_option("why, kept as the run's error message"),
        argument(
            "--no-compensate",
            dest="compensate",
            action="store_false",
            help="end the run without running its compensations",
        ),
    )

    # Set by apply: the run had been cancelled (or terminated) already, so nothing changed.
    already: str | None = None

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        outcome = request_cancel(
            run, reason=options["reason"], compensate=options["compensate"], user=user
        )
        self.already = outcome.stopped_as if outcome.already else None
        return outcome.run

    def outcome(self, run: Run) -> tuple[str, dict[str, Any]]:
        remark = f" ({self.already} already; nothing changed)" if self.already else ""
        return remark, {"already": self.already is not None}
