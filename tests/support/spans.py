"""Recording the OpenTelemetry spans Flowsite makes, in tests.

In the test process, :func:`record_spans` puts an SDK provider with the in-memory
exporter where :mod:`workflows.tracing` looks for one (the API's global provider, which
the SDK lets a process set only once, is left alone). Worker processes, which the
acceptance tests start, record with :func:`export_spans_from_env`: every span appended to
the JSON-lines file ``FLOWSITE_SPAN_FILE`` names, as it ends, so that a span of a worker
killed later is not lost. :func:`span_tree` draws spans as the trace a backend would show.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SPAN_FILE_ENV = "FLOWSITE_SPAN_FILE"


@dataclass(frozen=True)
class RecordedSpan:
    """What a test checks of one finished span (ids as hex, as backends show them)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    status: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    start_ns: int = 0
    end_ns: int = 0
    # The process that made it (recorded by the span file's exporter).
    pid: int = 0

    @classmethod
    def of(cls, span: Any) -> RecordedSpan:
        """From the SDK's ``ReadableSpan``."""
        context, parent = span.get_span_context(), span.parent
        return cls(
            name=span.name,
            trace_id=f"{context.trace_id:032x}",
            span_id=f"{context.span_id:016x}",
            parent_id=f"{parent.span_id:016x}" if parent is not None else "",
            kind=span.kind.name,
            status=span.status.status_code.name,
            attributes=dict(span.attributes or {}),
            events=[(event.name, dict(event.attributes or {})) for event in span.events],
            links=[
                (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}")
                for link in span.links
            ],
            start_ns=span.start_time or 0,
            end_ns=span.end_time or 0,
        )

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, line: str) -> RecordedSpan:
        data = json.loads(line)
        data["events"] = [tuple(event) for event in data["events"]]
        data["links"] = [tuple(link) for link in data["links"]]
        return cls(**data)


class SpanRecorder:
    """The provider :mod:`workflows.tracing` uses in this process, and what it recorded."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests")

    def spans(self) -> list[RecordedSpan]:
        """Every span that ended, in the order they ended."""
        return [RecordedSpan.of(span) for span in self.exporter.get_finished_spans()]

    def named(self, name: str) -> list[RecordedSpan]:
        return [span for span in self.spans() if span.name == name]


def export_spans_from_env() -> None:
    """In a process the acceptance tests start: when ``FLOWSITE_SPAN_FILE`` is set, make
    the SDK the global provider, appending each span to that file as it ends."""
    path = os.environ.get(SPAN_FILE_ENV)
    if not path:
        return
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class JsonLinesExporter(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            lines = "".join(
                replace(RecordedSpan.of(span), pid=os.getpid()).to_json() + "\n" for span in spans
            )
            with open(path, "a", encoding="utf-8") as out:  # one write: whole lines
                out.write(lines)
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter()))
    trace.set_tracer_provider(provider)


def read_span_file(path: Path) -> list[RecordedSpan]:
    if not path.exists():
        return []
    return [RecordedSpan.from_json(line) for line in path.read_text().splitlines() if line]


_SHOWN = (
    "flowsite.workflow.name",
    "flowsite.step.name",
    "flowsite.work.kind",
    "flowsite.item.key",
    "flowsite.step.attempt",
    "flowsite.outcome",
    "flowsite.flow.name",
)


def span_tree(spans: Iterable[RecordedSpan]) -> str:
    """The spans of each trace as an indented tree, children in the order they started:
    what a trace viewer shows, as text (``docs/operations/traces.md`` has one)."""
    spans = sorted(spans, key=lambda span: span.start_ns)
    ids = {span.span_id for span in spans}
    children: dict[str, list[RecordedSpan]] = {}
    for span in spans:
        parent = span.parent_id if span.parent_id in ids else ""
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def draw(span: RecordedSpan, depth: int) -> None:
        keys = _SHOWN[1:] if "flowsite.step.name" in span.attributes else _SHOWN
        shown = " ".join(
            f"{key.removeprefix('flowsite.')}={span.attributes[key]}"
            for key in keys
            if key in span.attributes
        )
        notes = "".join(f" [event {name}]" for name, _ in span.events)
        lines.append(f"{'  ' * depth}{span.name} {shown}{notes}".rstrip())
        for child in children.get(span.span_id, []):
            draw(child, depth + 1)

    for root in children.get("", []):
        if not root.parent_id or root.parent_id not in ids:
            lines.append(f"trace {root.trace_id}")
        draw(root, 1)
    return "\n".join(lines)
