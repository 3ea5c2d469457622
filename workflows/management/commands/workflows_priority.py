"""Change a run's priority (and that of its unstarted work and live child runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.arguments import priority_number
from workflows.management.options import argument
from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import change_priority

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Give run RUN (its id, a unique id prefix, or --business-key) the priority "
        "PRIORITY, -1000 to 1000 (higher is claimed first). Its steps, fan-out items and "
        "compensations that have not started and declare no priority of their own take "
        "it too, as do its live child runs; a queued run moves in its workflow's queue. "
        "Refused (exit status 1) for a run that already ended. "
        "Example: workflows_priority 3f2a9c1e 50 --user alice"
    )

    verb = "priority"
    acted_as = "who changed it"
    verb_arguments = (
        argument("priority", metavar="PRIORITY", type=priority_number, help="-1000 to 1000"),
    )

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        return change_priority(run, options["priority"], user=user)

    def outcome(self, run: Run) -> tuple[str, dict[str, Any]]:
        return f", priority {run.priority}", {"priority": run.priority}
