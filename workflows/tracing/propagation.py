"""The W3C ``traceparent`` a run stores, and back: how a trace crosses processes.

A run's context travels in its row (``Run.traceparent``, ``Flow.traceparent``,
``WebhookDelivery.traceparent``), not in queue messages: whichever worker claims a step,
days later or after a crash, reads it with the claim. Only the ``traceparent`` header is
kept; ``tracestate`` (vendor data, up to 512 bytes) is not, since no backend needs it to
join spans into a trace.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from workflows.tracing.otel import api

# version-trace_id-parent_id-flags, lower-case hex (W3C Trace Context, level 1).
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


def traceparent_of(span: Any) -> str:
    """``span``'s context as a ``traceparent`` header value ("" when it is not valid)."""
    context = span.get_span_context()
    if not context.is_valid:
        return ""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def context_of(traceparent: str) -> Any | None:
    """The OpenTelemetry context whose remote parent ``traceparent`` names; ``None`` for
    "" or a value that is not one (a span made under ``None`` starts from the current
    context). The last few are kept: a worker chaining through a run's steps asks for
    the same one at each."""
    if not traceparent:
        return None
    return _parsed(traceparent)


@functools.lru_cache(maxsize=64)
def _parsed(traceparent: str) -> Any | None:
    trace = api()
    if trace is None:
        return None
    match = _TRACEPARENT.match(traceparent)
    if match is None:
        return None
    _, trace_id, span_id, flags = traceparent.split("-")[:4]
    span_context = trace.SpanContext(
        trace_id=int(trace_id, 16),
        span_id=int(span_id, 16),
        is_remote=True,
        trace_flags=trace.TraceFlags(int(flags, 16)),
    )
    if not span_context.is_valid:
        return None
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))


def trace_id_of(traceparent: str) -> str:
    """The trace id (32 hex digits) a ``traceparent`` names; "" when there is none.

    Plain string work, so the console and the API show it without OpenTelemetry."""
    match = _TRACEPARENT.match(traceparent or "")
    return match.group(1) if match is not None and set(match.group(1)) != {"0"} else ""
