"""The frames of the operator commands: options declared as a table; parse them, call one
service, print its answer."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar

from django.core.management.base import BaseCommand, CommandParser

from workflows.management.arguments import refusals_as_command_errors
from workflows.management.options import Declaration, add_all
from workflows.management.output import to_json

Result = TypeVar("Result")


class DeclaredCommand(BaseCommand):
    """A command whose options are the table :attr:`arguments`
    (:mod:`workflows.management.options`), added in its order."""

    arguments: ClassVar[Sequence[Declaration]] = ()

    def add_arguments(self, parser: CommandParser) -> None:
        add_all(parser, self.arguments)


class OperatorCommand(DeclaredCommand, Generic[Result], metaclass=ABCMeta):
    """Parse, call one service, print what it returns.

    :meth:`handle` calls :meth:`call`, which calls the service function, and prints its
    answer: :meth:`as_json` with ``--json``, else :meth:`text`. A refused verb (a
    ``WorkflowError`` or ``PermissionDenied``) exits with status 1 and its message, and
    nothing is printed. Every command says its :meth:`call` and :meth:`text` (abstract:
    a command that forgets one cannot be made).
    """

    @abstractmethod
    def call(self, options: dict[str, Any]) -> Result:
        """Call the command's service function with what ``options`` say; its answer."""

    def as_json(self, result: Result) -> Any:
        """What ``--json`` prints of ``result`` (``result`` itself unless a command says)."""
        return result

    @abstractmethod
    def text(self, result: Result) -> str:
        """What the command prints of ``result`` for people."""

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            result = self.call(options)
        self.stdout.write(
            to_json(self.as_json(result)) if options.get("json") else self.text(result)
        )
