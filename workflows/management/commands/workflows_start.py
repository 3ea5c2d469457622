"""Start a workflow run from the shell."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.errors import WorkflowError
from workflows.management.arguments import DEADLINE_HELP, deadline_value
from workflows.management.output import to_json
from workflows.queries import run_summary
from workflows.services import start_run


class Command(BaseCommand):
    help = (
        "Start a run of the latest registered version of workflow NAME and print the run's "
        "id and status. Its steps then run in the workers. --deadline gives the run a "
        "deadline (default: the workflow's)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", metavar="NAME", help="registered workflow name")
        parser.add_argument(
            "--input",
            required=True,
            metavar="JSON",
            help='the run\'s input, a JSON object, e.g. \'{"order_id": "A-1"}\'',
        )
        parser.add_argument(
            "--idempotency-key",
            metavar="KEY",
            help="the same key with the same input returns the first run instead of a new one; "
            "with other input it is an error",
        )
        parser.add_argument(
            "--business-key",
            metavar="KEY",
            help="your own reference for the run (an order number, ...), shown in run lists",
        )
        parser.add_argument(
            "--priority",
            type=int,
            metavar="N",
            help="-1000 to 1000, higher is claimed first (default: the workflow's "
            "default_priority); also the run's place in its workflow's queue",
        )
        parser.add_argument(
            "--deadline", type=deadline_value, metavar="DEADLINE", help=DEADLINE_HELP
        )
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            data = json.loads(options["input"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--input is not valid JSON: {exc}") from exc
        try:
            run = start_run(
                options["name"],
                data,
                idempotency_key=options["idempotency_key"],
                business_key=options["business_key"],
                priority=options["priority"],
                deadline=options["deadline"],
            )
        except WorkflowError as exc:
            raise CommandError(exc.message) from exc
        summary = run_summary(run)
        if options["json"]:
            self.stdout.write(to_json(summary))
        else:
            self.stdout.write(
                f"run {summary['id']} of {summary['workflow']} v{summary['version']}: "
                f"{summary['status']}"
            )
