"""The frame of a command that applies one operator verb to one run and prints the run."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand

from workflows.management.arguments import (
    acting_user,
    add_run_arguments,
    refusals_as_command_errors,
    run_from_options,
)
from workflows.management.output import run_line, to_json
from workflows.models import Run
from workflows.queries import run_summary

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class RunVerbCommand(BaseCommand, ABC):
    """Names the run (id, id prefix or ``--business-key``), the acting ``--user`` and
    ``--json``; a subclass names its ``verb`` (a key of the verb table,
    :mod:`workflows.services.access`, which says what ``--user`` must hold), adds its own
    options and says what to do in :meth:`apply`."""

    verb: str
    acted_as = "who did it"

    def add_verb_arguments(self, parser: Any) -> None:
        """Options of this verb besides the run, the user and ``--json``."""

    @abstractmethod
    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        """Call the verb's service function for ``run`` as ``user``; return the run."""

    def outcome(self) -> tuple[str, dict[str, Any]]:
        """What :meth:`apply` found besides the run: words to add to the printed line,
        and fields to add to the JSON (nothing, unless a verb says more)."""
        return "", {}

    def add_arguments(self, parser: Any) -> None:
        add_run_arguments(parser)
        self.add_verb_arguments(parser)
        parser.add_argument("--user", metavar="U", help=f"username recorded as {self.acted_as}")
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = run_from_options(options)
            run = self.apply(run, acting_user(options["user"], self.verb), options)
        summary = run_summary(run)
        remark, fields = self.outcome()
        if options["json"]:
            self.stdout.write(to_json({**summary, **fields}))
        else:
            self.stdout.write(run_line(summary) + remark)
