"""Dismiss an ended run: the console's default lists and attention views leave it out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.management.run_verb import RunVerbCommand
from workflows.models import Run
from workflows.services import dismiss_run

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class Command(RunVerbCommand):
    help = (
        "Dismiss ended run RUN (its id, a unique id prefix, or --business-key): it has been "
        "seen to, so the console's runs list, its attention filters, the dashboard's "
        "attention counts and the API's runs list leave it out unless asked for "
        "(dismissed=yes or all). Nothing of its work changes; workflows_undismiss takes "
        "it back, and a retry or rerun clears it. A run dismissed already is left as it "
        "is. Refused (exit status 1) for a run not ended. "
        "Example: workflows_dismiss 3f2a9c1e --user alice"
    )

    verb = "dismiss"
    acted_as = "who dismissed it"

    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        return dismiss_run(run, user=user)

    def outcome(self, run: Run) -> tuple[str, dict[str, Any]]:
        return ", dismissed", {}
