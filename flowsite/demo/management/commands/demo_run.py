"""Run the demo site, a django-q2 cluster, the sweeper and the label printer until Ctrl-C
(``make run``)."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowsite.demo import label_account
from flowsite.demo.supervisor import Child, supervise


class Command(BaseCommand):
    help = (
        "Run the demo until stopped: `workflows_worker`, `workflows_sweeper`, `runserver "
        "--noreload HOST:PORT` and the external label printer (flowsite/label_printer.py, "
        "over the site's /api/work/), each in its own process group. Ctrl-C (SIGINT) or SIGTERM "
        "is passed on to each of them, as is a SIGINT or SIGHUP sent to its parent alone "
        "that the parent does not pass on (kill -INT of `make run`'s make, on Linux); "
        "whatever still runs after --grace seconds is "
        "killed with its whole process group (the cluster's workers too), so everything is "
        "gone within --grace plus about a second. A second Ctrl-C kills at once. If one "
        "of them exits on its own, the others are stopped and the command exits "
        "non-zero. Run `migrate` and `demo_setup` first; `make run` does all of this."
    )
    # The children run the system checks themselves; the supervisor touches no database.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to serve on")
        parser.add_argument("--port", type=int, default=8000, help="port to serve on")
        parser.add_argument(
            "--grace",
            type=float,
            default=5.0,
            help="seconds the processes get to stop before SIGKILL (default 5)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["grace"] < 0:
            raise CommandError("--grace must be zero or more seconds")
        host = options["host"]
        address = f"[{host}]:{options['port']}" if ":" in host else f"{host}:{options['port']}"
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        children = [
            Child("workflows_worker", [*manage, "workflows_worker"]),
            Child("workflows_sweeper", [*manage, "workflows_sweeper"]),
            Child("runserver", [*manage, "runserver", "--noreload", address]),
            # It retries until the site answers: started with it, it needs no wait.
            Child(
                "label_printer",
                [
                    sys.executable,
                    str(settings.BASE_DIR / "flowsite" / "label_printer.py"),
                    "--url",
                    f"http://{address}",
                    "--token",
                    label_account.TOKEN,
                ],
            ),
        ]
        status = supervise(children, options["grace"], self._log)
        if status:
            sys.exit(status)

    def _log(self, line: str) -> None:
        self.stderr.write(f"demo_run: {line}")
