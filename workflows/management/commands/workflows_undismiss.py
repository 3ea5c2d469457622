"""Take back a run's dismissal: it shows in the default lists again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import undismiss_run

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Undismiss run RUN (its id, a unique id prefix, or --business-key): the console's "
        "runs list and, if it needs attention, the attention views show it again. A run "
        "not dismissed is left as it is. Refused (exit status 1) for a run not ended. "
        "Example: workflows_undismiss 3f2a9c1e --user alice"
    )

    verb = "undismiss"
    acted_as = "who undismissed it"

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        return undismiss_run(run, user=user)
