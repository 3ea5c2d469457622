"""Resume a paused run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import resume_run

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Resume paused run RUN (its id, a unique id prefix, or --business-key): a step that "
        "failed while paused fails the run now; steps whose upstreams finished start; ready "
        "work is dispatched again; timers that came due fire. Refused (exit status 1) unless "
        "the run is paused."
    )

    verb = "resume"
    acted_as = "who resumed it"

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        return resume_run(run, user=user)
