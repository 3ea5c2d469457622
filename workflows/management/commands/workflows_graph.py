"""Print the step graph of a workflow definition as Mermaid or Graphviz DOT source."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from workflows.definitions.render import RENDERERS
from workflows.management.base import OperatorCommand
from workflows.management.options import argument
from workflows.queries import render_definition


class Command(OperatorCommand[str]):
    help = (
        "Print the step graph of workflow NAME: one node per step labelled with its kind, "
        "edges from after=, steps with when= marked '?' behind dashed edges, and each "
        "loop's way back to its back_to step as a dotted edge labelled with its bound. Paste "
        "Mermaid into Markdown, or pipe DOT into `dot -Tsvg`."
    )

    arguments = (
        argument("name", metavar="NAME", help="registered workflow name"),
        argument(
            "--version",
            type=int,
            metavar="V",
            help="the workflow version to draw (default: the latest registered)",
        ),
        argument(
            "--format",
            choices=sorted(RENDERERS),
            default="mermaid",
            help="output notation (default: %(default)s)",
        ),
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # --version here picks the workflow's version; it replaces Django's --version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def call(self, options: dict[str, Any]) -> str:
        return render_definition(
            options["name"], version=options["version"], format=options["format"]
        )

    def text(self, result: str) -> str:
        return result
