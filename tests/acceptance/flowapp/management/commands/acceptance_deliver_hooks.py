"""Deliver hooks until none are left: one of N racing deliverer processes.

Every hook this process receives is appended to LOG_FILE as ``<event id> <pid>``, so
the test can count deliveries across processes. With ``--go-file`` the process first
creates ``GO_FILE.<pid>.ready`` and waits for GO_FILE, so all deliverers start together.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from tests.acceptance.flowapp.management.starting_line import add_go_file_argument, wait_for_go
from workflows import hooks
from workflows.models import Event
from workflows.workers.scanners import deliver_hooks


class Command(BaseCommand):
    help = "Deliver hooks until no event is undelivered, logging each hook to LOG_FILE."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("log_file", help="append '<event id> <pid>' for each hook")
        add_go_file_argument(parser)
        parser.add_argument("--batch", type=int, default=5, help="events per claim")
        parser.add_argument("--deadline", type=float, default=60.0, help="seconds")

    def handle(
        self, *args: Any, log_file: str, go_file: str | None, batch: int, deadline: float, **_: Any
    ) -> None:
        give_up_at = time.monotonic() + deadline

        def record(sender: str, event: Event, **kwargs: Any) -> None:
            # One short O_APPEND write per line: lines of racing processes never interleave.
            with open(log_file, "a") as log:
                log.write(f"{event.pk} {os.getpid()}\n")

        for signal in hooks.ALL_HOOKS:
            signal.connect(record, weak=False)
        if go_file:
            wait_for_go(go_file, give_up_at=give_up_at, deadline=deadline)
        delivered = 0
        while Event.objects.filter(published=False).exists():
            if time.monotonic() > give_up_at:
                raise CommandError(f"events still undelivered after {deadline} s")
            delivered += deliver_hooks(limit=batch).done
        self.stdout.write(json.dumps({"pid": os.getpid(), "delivered": delivered}))
