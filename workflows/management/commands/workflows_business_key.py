"""Give a run not ended a business key after its start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.options import argument
from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import set_business_key

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Give run RUN (its id, a unique id prefix, or --business-key naming the key it holds "
        "now) the business key KEY, up to 255 "
        "characters. The key it holds already changes nothing. Refused (exit status 1) "
        "for a run that ended, and, for a workflow with unique_business_key, for a key "
        "another live run of it holds (business_key_in_use). "
        "Example: workflows_business_key 3f2a9c1e ORDER-1042 --user alice"
    )

    verb = "business_key"
    acted_as = "who set it"
    verb_arguments = (argument("key", metavar="KEY", help="the new business key"),)

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        return set_business_key(run, options["key"], user=user)

    def outcome(self, run: Run) -> tuple[str, dict[str, Any]]:
        return f", business key {run.business_key!r}", {}
