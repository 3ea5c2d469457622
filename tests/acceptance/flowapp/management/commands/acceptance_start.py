"""Start runs from a separate process, as a web process would, and print their ids.

Runs started here are dispatched by this process's executor (django-q2 in the
acceptance settings), so the workers get real queue messages; pytest's own process
uses the inline executor and could not send them.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

from django.core.management.base import BaseCommand

import workflows


class Command(BaseCommand):
    help = "Start one run of WORKFLOW per input in the JSON list INPUTS; print the run ids."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("workflow")
        parser.add_argument("inputs", help='JSON list of input objects, e.g. "[{}, {}]"')
        parser.add_argument(
            "--in-span",
            default="",
            help="start the runs inside a server span of this name, as a traced web request "
            "would (the process's OpenTelemetry provider: tests/support/spans.py)",
        )

    def handle(self, *args: Any, workflow: str, inputs: str, in_span: str, **options: Any) -> None:
        with ExitStack() as span:
            if in_span:
                from opentelemetry import trace

                tracer = trace.get_tracer("acceptance.web")
                span.enter_context(
                    tracer.start_as_current_span(in_span, kind=trace.SpanKind.SERVER)
                )
            run_ids = [str(workflows.start_run(workflow, data).pk) for data in json.loads(inputs)]
        self.stdout.write(json.dumps(run_ids))
