"""OpenTelemetry traces of runs, steps and workers (the optional ``otel`` extra).

Flowsite uses the OpenTelemetry API only, as the OpenTelemetry documentation asks of
libraries: the SDK, its exporters and their sampling are the host project's choice. With
the API absent nothing here imports it and no span is made; with the API present but no
SDK configured (the API's no-op provider), nothing is made either, at the price of one
check per span (:mod:`workflows.tracing.otel`).

One trace per run: ``start_run`` opens a ``workflow.start`` span in its caller and the
run stores that span's W3C ``traceparent`` (``Run.traceparent``); every attempt of a
step, fan-out item, compensation or external job is a ``workflow.step`` span, a child of
it, in whichever process and however much later the attempt runs. Child runs and flow
members start under their parent's (their flow's) context, so they continue its trace.
docs/operations/traces.md says what each span carries.
"""

from workflows.tracing.propagation import trace_id_of
from workflows.tracing.spans import (
    UNTRACED,
    AttemptSpan,
    attempt_span,
    delivery_span,
    external_attempt_span,
    note_decision,
    start_span,
)

__all__ = [
    "UNTRACED",
    "AttemptSpan",
    "attempt_span",
    "delivery_span",
    "external_attempt_span",
    "note_decision",
    "start_span",
    "trace_id_of",
]
