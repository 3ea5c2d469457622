"""Send a signal to a run."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.management.arguments import acting_user, json_value, refusals_as_command_errors
from workflows.management.output import to_json
from workflows.queries import get_run, signal_summary
from workflows.services import send_signal


class Command(BaseCommand):
    help = (
        "Send signal NAME to run RUN. A step waiting for NAME consumes it at once; "
        "otherwise the run keeps it until a WaitForSignal step for NAME starts. Refused "
        "(exit status 1) unless the run is pending, running or waiting."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("run_id", metavar="RUN", help="the run's id (a UUID)")
        parser.add_argument("name", metavar="NAME", help="the signal's name")
        parser.add_argument(
            "--payload",
            type=json_value,
            metavar="JSON",
            help="any JSON value, the output of the step that consumes the signal "
            "(default: null), e.g. '{\"paid\": true}'",
        )
        parser.add_argument(
            "--idempotency-key",
            metavar="KEY",
            help="sending again with the same key and payload returns the first signal "
            "instead of a new one; with another payload it is an error",
        )
        parser.add_argument("--user", metavar="U", help="username recorded as who sent it")
        parser.add_argument("--json", action="store_true", help="print the signal as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = get_run(options["run_id"])
            signal = send_signal(
                run,
                options["name"],
                options["payload"],
                idempotency_key=options["idempotency_key"],
                user=acting_user(options["user"], "signal"),
            )
        summary = signal_summary(signal)
        if options["json"]:
            self.stdout.write(to_json(summary))
            return
        consumer = summary["consumed_by"]
        self.stdout.write(
            f"signal {summary['name']!r} ({summary['id']}) sent to run {summary['run']}: "
            + (f"consumed by step {consumer!r}" if consumer else "kept until a step waits for it")
        )
