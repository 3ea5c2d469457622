"""Start runs with a priority each from a separate process, and print their ids.

Like ``acceptance_start``, the runs are dispatched by this process's django-q2 executor;
each input comes with the priority its run starts with (``start_run(..., priority=N)``).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

import workflows


class Command(BaseCommand):
    help = (
        "Start one run of WORKFLOW per [priority, input] pair in the JSON list RANKED, in "
        "order; print the run ids."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("workflow")
        parser.add_argument("ranked", help='JSON list of [priority, input], e.g. "[[5, {}]]"')

    def handle(self, *args: Any, workflow: str, ranked: str, **options: Any) -> None:
        run_ids = [
            str(workflows.start_run(workflow, data, priority=priority).pk)
            for priority, data in json.loads(ranked)
        ]
        self.stdout.write(json.dumps(run_ids))
