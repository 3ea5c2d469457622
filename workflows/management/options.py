"""A command's options as a table, and the options several commands share, declared once.

A command lists what ``add_arguments`` would add, in order, as data
(:attr:`~workflows.management.base.DeclaredCommand.arguments`): :func:`argument` for one
``add_argument`` call, :class:`Group` and :class:`OneOf` for argparse's groups,
:class:`Subcommands` for actions such as ``workflows_budgets raise``. An option that
several commands take (``--json``, ``--user``, ``--reason``, the run they act on) is a
function or constant here, so that it is worded and parsed alike everywhere.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from workflows.management.arguments import DEADLINE_HELP, deadline_value, positive_int, tag_value

# What ``add_argument`` is called on: a parser, or one of its groups.
Container = argparse._ActionsContainer


@dataclass(frozen=True)
class Argument:
    """One ``add_argument(*flags, **settings)`` call."""

    flags: tuple[str, ...]
    settings: Mapping[str, Any]

    def add_to(self, parser: Container) -> None:
        parser.add_argument(*self.flags, **self.settings)


def argument(*flags: str, **settings: Any) -> Argument:
    """Declare ``add_argument(*flags, **settings)``, to be added with the rest of a table."""
    return Argument(flags, settings)


@dataclass(frozen=True)
class Group:
    """Arguments listed under their own title in ``--help``."""

    title: str
    arguments: tuple[Argument, ...]

    def add_to(self, parser: Container) -> None:
        add_all(parser.add_argument_group(self.title), self.arguments)


@dataclass(frozen=True)
class OneOf:
    """Arguments of which at most one may be given (a mutually exclusive group)."""

    arguments: tuple[Argument, ...]

    def add_to(self, parser: Container) -> None:
        add_all(parser.add_mutually_exclusive_group(), self.arguments)


@dataclass(frozen=True)
class Subcommand:
    """One action of a command (``list``, ``raise``, ...): its name, help and arguments,
    and command lines that use it, which its own ``--help`` ends with (``examples``)."""

    name: str
    help: str
    arguments: tuple[Declaration, ...]
    examples: tuple[str, ...] = ()

    def add_to(self, actions: argparse._SubParsersAction) -> None:
        """Add the action's parser: the command's ``--help`` lists it by its ``help``,
        and its own ``--help`` says that ``help`` as a sentence, then its examples (kept
        as written, one a line)."""
        listed = "\n".join(f"  {example}" for example in self.examples)
        parser = actions.add_parser(
            self.name,
            help=self.help,
            description=textwrap.fill(f"{self.help[:1].upper()}{self.help[1:]}."),
            epilog=f"{'example' if len(self.examples) == 1 else 'examples'}:\n{listed}"
            if self.examples
            else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_all(parser, self.arguments)


@dataclass(frozen=True)
class Subcommands:
    """The actions a command's first word chooses, stored in ``options[dest]``.

    With a ``default``, the word may be left out: that action is taken, and the
    arguments the command declares after this table are the default action's.
    """

    dest: str
    actions: tuple[Subcommand, ...]
    default: str | None = None

    def add_to(self, parser: Container) -> None:
        if not isinstance(parser, argparse.ArgumentParser):
            raise TypeError("subcommands belong to a parser, not to a group of it")
        chosen = parser.add_subparsers(
            dest=self.dest,
            metavar="{" + ",".join(action.name for action in self.actions) + "}",
            required=self.default is None,
        )
        for action in self.actions:
            action.add_to(chosen)
        if self.default is not None:
            parser.set_defaults(**{self.dest: self.default})


Declaration = Argument | Group | OneOf | Subcommands


def add_all(parser: Container, declarations: Iterable[Declaration]) -> None:
    """Add ``declarations`` to ``parser`` (or to a group of it) in their order."""
    for declaration in declarations:
        declaration.add_to(parser)


def json_option(what: str) -> Argument:
    """``--json``: print ``what`` as JSON instead of lines for people."""
    return argument("--json", action="store_true", help=f"print {what} as JSON")


def user_option(help: str, *, required: bool = False) -> Argument:
    """``--user U``: the username a verb acts as
    (:func:`~workflows.management.arguments.acting_user`)."""
    return argument("--user", required=required, metavar="U", help=help)


def reason_option(help: str) -> Argument:
    """``--reason TEXT``: why, in the operator's words (empty by default)."""
    return argument("--reason", default="", metavar="TEXT", help=help)


def deadline_option(what: str = "") -> Argument:
    """``--deadline DEADLINE``: when the run must have ended; ``what`` prefixes the help."""
    return argument(
        "--deadline", type=deadline_value, metavar="DEADLINE", help=what + DEADLINE_HELP
    )


def tag_option(help: str) -> Argument:
    """``--tag KEY=VALUE``, repeatable: a run's tag (docs/guide/tags.md); a malformed one
    is an error naming it."""
    return argument(
        "--tag", action="append", type=tag_value, metavar="KEY=VALUE", dest="tags", help=help
    )


def dry_run_option(help: str) -> Argument:
    """``--dry-run``: count or report, change nothing."""
    return argument("--dry-run", action="store_true", help=help)


def status_option(things: str, statuses: list[str]) -> Argument:
    """``--status STATUS``: only the ``things`` in one of ``statuses``."""
    return argument(
        "--status",
        choices=statuses,
        metavar="STATUS",
        help=f"only {things} in this status: {', '.join(statuses)}",
    )


# How many rows a listing shows when --limit does not say.
DEFAULT_LIMIT = 50


def limit_option(things: str, default: int | None = None) -> Argument:
    """``--limit N``: show at most N ``things``; :data:`DEFAULT_LIMIT` when not given."""
    return argument(
        "--limit",
        type=positive_int,
        default=default,
        metavar="N",
        help=f"show at most N {things} (default: {DEFAULT_LIMIT})",
    )


# The run a signal command names: its whole id.
RUN_ID = argument("run_id", metavar="RUN", help="the run's id (a UUID)")

# The run a command acts on: RUN (an id or a unique prefix of one) or --business-key KEY,
# found by :func:`~workflows.management.arguments.run_from_options`.
RUN_ARGUMENTS = (
    argument(
        "run_id",
        nargs="?",
        metavar="RUN",
        help="the run's id, or a prefix of it that only one run has (at least 4 characters)",
    ),
    argument(
        "--business-key",
        metavar="KEY",
        help="the run with this business key (refused if several runs have it)",
    ),
)
