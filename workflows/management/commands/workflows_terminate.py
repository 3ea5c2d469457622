"""Terminate a run: stop it at once, without compensation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.options import reason_option
from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import terminate_run

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Terminate run RUN (its id, a unique id prefix, or --business-key) and its child "
        "runs: unstarted work is cancelled, running attempts lose their lease (their late "
        "results are rejected), compensations that have not run are skipped, and the run "
        "ends terminated. Use workflows_cancel to stop a run and compensate instead. "
        "Refused (exit status 1) for a run that already ended."
    )

    verb = "terminate"
    acted_as = "who terminated it"

    verb_arguments = (reason_option("why, kept as the run's error message"),)

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        return terminate_run(run, reason=options["reason"], user=user)
