"""The frame of a command that applies one operator verb to one run and prints the run."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from django.core.management.base import CommandParser

from workflows.management.arguments import acting_user, run_from_options
from workflows.management.base import OperatorCommand
from workflows.management.options import (
    RUN_ARGUMENTS,
    Declaration,
    add_all,
    json_option,
    user_option,
)
from workflows.management.output import run_line
from workflows.models import Run
from workflows.queries import run_summary

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


class RunVerbCommand(OperatorCommand[Run], ABC):
    """Names the run (id, id prefix or ``--business-key``), the acting ``--user`` and
    ``--json``; a subclass names its ``verb`` (a key of the verb table,
    :mod:`workflows.services.access`, which says what ``--user`` must hold), declares its
    own options in :attr:`verb_arguments` and says what to do in :meth:`apply`."""

    verb: str
    acted_as = "who did it"
    verb_arguments: ClassVar[tuple[Declaration, ...]] = ()

    @abstractmethod
    def apply(self, run: Run, user: AnyUser | None, options: dict[str, Any]) -> Run:
        """Call the verb's service function for ``run`` as ``user``; return the run."""

    def outcome(self, run: Run) -> tuple[str, dict[str, Any]]:
        """What :meth:`apply` found besides the run: words to add to the printed line,
        and fields to add to the JSON (nothing, unless a verb says more)."""
        return "", {}

    def add_arguments(self, parser: CommandParser) -> None:
        user = user_option(f"username recorded as {self.acted_as}")
        add_all(parser, (*RUN_ARGUMENTS, *self.verb_arguments, user, json_option("the run")))

    def call(self, options: dict[str, Any]) -> Run:
        run = run_from_options(options)
        return self.apply(run, acting_user(options["user"], self.verb), options)

    def as_json(self, result: Run) -> dict[str, Any]:
        return {**run_summary(result), **self.outcome(result)[1]}

    def text(self, result: Run) -> str:
        return run_line(run_summary(result)) + self.outcome(result)[0]
