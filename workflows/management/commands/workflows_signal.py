"""Send a signal to a run."""

from __future__ import annotations

from typing import Any

from workflows.management.arguments import acting_user, json_value
from workflows.management.base import OperatorCommand
from workflows.management.options import RUN_ID, argument, json_option, user_option
from workflows.models import Signal
from workflows.queries import get_run, signal_summary
from workflows.services import send_signal


class Command(OperatorCommand[Signal]):
    help = (
        "Send signal NAME to run RUN. A step waiting for NAME consumes it at once; "
        "otherwise the run keeps it until a WaitForSignal step for NAME starts. Refused "
        "(exit status 1) unless the run is pending, running or waiting."
    )

    arguments = (
        RUN_ID,
        argument("name", metavar="NAME", help="the signal's name"),
        argument(
            "--payload",
            type=json_value,
            metavar="JSON",
            help="any JSON value, the output of the step that consumes the signal "
            "(default: null), e.g. '{\"paid\": true}'",
        ),
        argument(
            "--idempotency-key",
            metavar="KEY",
            help="sending again with the same key and payload returns the first signal "
            "instead of a new one; with another payload it is an error",
        ),
        user_option("username recorded as who sent it"),
        json_option("the signal"),
    )

    def call(self, options: dict[str, Any]) -> Signal:
        return send_signal(
            get_run(options["run_id"]),
            options["name"],
            options["payload"],
            idempotency_key=options["idempotency_key"],
            user=acting_user(options["user"], "signal"),
        )

    def as_json(self, result: Signal) -> dict[str, Any]:
        return signal_summary(result)

    def text(self, result: Signal) -> str:
        summary = signal_summary(result)
        consumer = summary["consumed_by"]
        return f"signal {summary['name']!r} ({summary['id']}) sent to run {summary['run']}: " + (
            f"consumed by step {consumer!r}" if consumer else "kept until a step waits for it"
        )
