"""The reference of the ``workflows`` app's management commands, as Markdown.

Read from each command's own parser (``create_parser``, what ``--help`` prints), so the
page says what the command accepts today: its help, then its arguments and options, and
those of each subcommand. Django's options that every command shares (``--settings``,
``--verbosity``, ...) are left out; the page says so once.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from django.core.management import load_command_class
from django.core.management.base import BaseCommand
from reference_markdown import cell, prose, table

APP = "workflows"


def command_names() -> list[str]:
    """Every management command of the app, by name."""
    import workflows.management.commands as package

    folder = Path(package.__file__).parent
    return sorted(path.stem for path in folder.glob("*.py") if not path.stem.startswith("_"))


def _shared_options() -> set[str]:
    """The destinations of the options Django gives every command."""
    return {action.dest for action in BaseCommand().create_parser("manage.py", "x")._actions}


def _name(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar if isinstance(action.metavar, str) else action.dest
    takes = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
    return ", ".join(f"{option}{takes}" for option in action.option_strings)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The action's help as ``--help`` prints it (``%(default)s`` expanded), its choices."""
    text = parser._get_formatter()._expand_help(action) if action.help else ""
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        text += f" (one of: {', '.join(f'`{choice}`' for choice in action.choices)})"
    if action.required and action.option_strings:
        text += " (required)"
    return text


def _arguments(parser: argparse.ArgumentParser, shared: set[str]) -> list[str]:
    rows = [
        [f"`{cell(_name(action))}`", cell(prose(_help(parser, action)))]
        for action in parser._actions
        if action.dest not in shared
        and action.help != argparse.SUPPRESS
        and not isinstance(action, argparse._SubParsersAction)
    ]
    return table(["Argument", "Description"], rows) if rows else ["Takes no arguments."]


def _subcommands(parser: argparse.ArgumentParser, shared: set[str], command: str) -> list[str]:
    lines: list[str] = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        summaries = {choice.dest: choice.help for choice in action._choices_actions}
        for name, subparser in action.choices.items():
            lines += ["", f"### `{command} {name}`", ""]
            description = subparser.description or summaries.get(name)
            if description:
                lines += [prose(description), ""]
            lines += _arguments(subparser, shared)
    return lines


def command_markdown(name: str) -> list[str]:
    """One command: a heading, its help, its arguments, its subcommands."""
    command = load_command_class(APP, name)
    parser = command.create_parser("manage.py", name)
    shared = _shared_options()
    lines = [f"## `{name}`", "", prose(str(command.help)), ""]
    lines += _arguments(parser, shared)
    lines += _subcommands(parser, shared, name)
    return [*lines, ""]


def commands_markdown() -> str:
    """Every command of the app, ordered by name."""
    lines = [
        "Every command also takes Django's own options (`--settings`, `--pythonpath`, "
        "`--verbosity`, `--traceback`, `--no-color`, `--force-color`, `--skip-checks`); "
        "`manage.py help <command>` prints the same as below.",
        "",
    ]
    for name in command_names():
        lines += command_markdown(name)
    return "\n".join(lines)
