"""Make a signal token: what an outside system posts to send one signal to one run."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from django.utils.dateparse import parse_duration

from workflows.management.base import OperatorCommand
from workflows.management.options import RUN_ID, argument, json_option
from workflows.queries import get_run
from workflows.services.signal_tokens import DEFAULT_EXPIRES_IN, signal_token


def duration_value(text: str) -> timedelta:
    """argparse type of a DURATION: seconds (``3600``), an ISO 8601 duration (``P3D``,
    ``PT12H``) or Django's ``"3 days, 0:00:00"``. Whether it is short enough is the
    service's to say (``WORKFLOWS["SIGNAL_TOKEN_MAX_AGE"]``)."""
    duration = parse_duration(text.strip())
    if duration is None:
        raise argparse.ArgumentTypeError(
            f"a duration is seconds (3600) or an ISO 8601 duration (P3D, PT12H), got {text!r}"
        )
    return duration


class Command(OperatorCommand[dict[str, Any]]):
    help = (
        "Print a signed token that allows exactly one thing: sending signal NAME to run "
        "RUN, until it expires. Hand it to the outside system, which posts it with its "
        "payload to POST /api/signals/by-token/ without a login. Nothing is stored: a "
        "token cannot be withdrawn one by one (rotating SECRET_KEY withdraws them all). "
        "Refused (exit status 1) for an unknown run, a signal no step of the run's "
        "workflow waits for, or an expiry longer than WORKFLOWS['SIGNAL_TOKEN_MAX_AGE']."
    )

    arguments = (
        RUN_ID,
        argument("name", metavar="NAME", help="the signal the token allows"),
        argument(
            "--expires-in",
            type=duration_value,
            default=DEFAULT_EXPIRES_IN,
            metavar="DURATION",
            help="how long the token works: seconds or an ISO 8601 duration such as P3D "
            "(default: 7 days)",
        ),
        json_option("the token, run, signal and expiry"),
    )

    def call(self, options: dict[str, Any]) -> dict[str, Any]:
        run = get_run(options["run_id"])
        token = signal_token(run, options["name"], expires_in=options["expires_in"])
        expires_in = options["expires_in"].total_seconds()
        return {
            "token": token,
            "run": str(run.pk),
            "signal": options["name"],
            "expires_in": expires_in,
        }

    def text(self, result: dict[str, Any]) -> str:
        return str(result["token"])
