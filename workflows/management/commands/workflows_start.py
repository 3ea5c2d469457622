"""Start a workflow run from the shell."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from workflows.management.arguments import tags_given
from workflows.management.base import OperatorCommand
from workflows.management.options import argument, deadline_option, json_option, tag_option
from workflows.management.output import run_line
from workflows.models import Run
from workflows.queries import run_summary
from workflows.services import start_run
from workflows.status import RunTrigger


class Command(OperatorCommand[Run]):
    help = (
        "Start a run of the latest registered version of workflow NAME and print the run's "
        "id and status. Its steps then run in the workers. --deadline gives the run a "
        "deadline (default: the workflow's); --variables the run's first variables, which "
        "its steps read (ctx.variables) and change (ctx.set_variables); --title what the "
        "console's lists show of it; --tag KEY=VALUE (repeatable) a tag to find it by. "
        "The run's trigger is 'command'."
    )

    arguments = (
        argument("name", metavar="NAME", help="registered workflow name"),
        argument(
            "--input",
            required=True,
            metavar="JSON",
            help='the run\'s input, a JSON object, e.g. \'{"order_id": "A-1"}\'',
        ),
        argument(
            "--idempotency-key",
            metavar="KEY",
            help="the same key with the same input returns the first run instead of a new one; "
            "with other input it is an error",
        ),
        argument(
            "--business-key",
            metavar="KEY",
            help="your own reference for the run (an order number, ...), shown in run lists",
        ),
        argument(
            "--priority",
            type=int,
            metavar="N",
            help="-1000 to 1000, higher is claimed first (default: the workflow's "
            "default_priority); also the run's place in its workflow's queue",
        ),
        argument(
            "--title",
            metavar="TEXT",
            default="",
            help="what the runs list shows of the run, up to 200 characters (default: its "
            "workflow)",
        ),
        deadline_option(),
        argument(
            "--variables",
            metavar="JSON",
            help='the run\'s first variables, a JSON object, e.g. \'{"region": "eu"}\' '
            "(at most MAX_VARIABLES_BYTES bytes)",
        ),
        tag_option("a tag of the run, e.g. customer=acme; repeat for several (at most 32)"),
        json_option("the run"),
    )

    def call(self, options: dict[str, Any]) -> Run:
        data = _json_option(options, "input")
        variables = _json_option(options, "variables") if options["variables"] else None
        return start_run(
            options["name"],
            data,
            idempotency_key=options["idempotency_key"],
            business_key=options["business_key"],
            priority=options["priority"],
            deadline=options["deadline"],
            variables=variables,
            title=options["title"],
            trigger=RunTrigger.COMMAND,
            tags=tags_given(options["tags"]),
        )

    def as_json(self, result: Run) -> dict[str, Any]:
        return run_summary(result)

    def text(self, result: Run) -> str:
        return run_line(run_summary(result))


def _json_option(options: dict[str, Any], name: str) -> Any:
    """The JSON of option ``--<name>``; a clear error when it does not parse."""
    try:
        return json.loads(options[name])
    except json.JSONDecodeError as exc:
        raise CommandError(f"--{name} is not valid JSON: {exc}") from exc
