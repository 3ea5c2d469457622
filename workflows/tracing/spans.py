"""The spans Flowsite makes: a run's start, an attempt, a webhook delivery, a decision.

Each function asks :func:`~workflows.tracing.otel.tracer` first and does nothing more
when it answers ``None``; attributes are built only once a span will be made (the
callers pass a function that builds them), so a run that is not traced pays for one
check per span. Attribute names follow the OpenTelemetry semantic conventions where one
exists (``error.type``, ``code.function.name``, ``http.request.method``, ``url.full``,
``server.address``, ``http.response.status_code``) and carry a ``flowsite.`` prefix
where none does (``flowsite.run.id``, ``flowsite.step.name``, …).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from workflows.tracing.otel import api, tracer
from workflows.tracing.propagation import context_of, traceparent_of

Attributes = Mapping[str, str | int | float | bool]


@contextmanager
def start_span(
    name: str, attributes: Callable[[], Attributes], *, parent: str = ""
) -> Iterator[str]:
    """Open the span that starts a run (``workflow.start``) or a flow (``workflow.flow``)
    and yield its ``traceparent`` for the row to keep ("" when not tracing).

    ``parent``: the ``traceparent`` to start under (a child run's parent run, a flow
    member's flow); "" starts under the caller's current span, if any, so a run started
    while a web request is traced joins the request's trace.
    """
    made = tracer()
    if made is None:
        yield ""
        return
    with made.start_as_current_span(
        name, context=context_of(parent), attributes=attributes()
    ) as span:
        yield traceparent_of(span)


class AttemptSpan:
    """The span of one attempt, current while the block it opens runs, for its worker to
    say how the attempt ended (:func:`attempt_span`).

    A class rather than a generator-based context manager, and the span made current by
    attaching its context directly: this runs once per attempt, and every microsecond
    here is paid by every traced step.
    """

    __slots__ = ("_span", "_token")

    def __init__(self, span: Any = None) -> None:
        self._span = span
        self._token: Any = None

    def __enter__(self) -> AttemptSpan:
        if self._span is not None:
            from opentelemetry import context, trace

            self._token = context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._span is not None:
            from opentelemetry import context

            context.detach(self._token)
            self._span.end()

    def ended(self, outcome: str, error: BaseException | None = None) -> None:
        """Record the attempt's ``outcome`` (``completed``, ``failed``, ``awaiting`` …);
        with ``error``, the exception and an error status."""
        if self._span is None:
            return
        self._span.set_attribute("flowsite.outcome", outcome)
        if error is not None:
            failed(self._span, error)


# What an attempt that is not traced holds: entering it and every call do nothing.
UNTRACED = AttemptSpan()


def failed(span: Any, error: BaseException) -> None:
    """Mark ``span`` as failed by ``error`` (the exception event, ``error.type``, status)."""
    trace = api()
    assert trace is not None, "a span exists only where the API does"
    span.record_exception(error)
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)[:1000]))


def attempt_span(traceparent: str, attributes: Callable[[], Attributes]) -> AttemptSpan:
    """The ``workflow.step`` span of one attempt, to open with ``with``: current while
    its handler runs, so the handler's own instrumented calls (HTTP, database) and its
    log records nest under it.

    A child of the run's start (``traceparent``), however much later the attempt runs,
    so a run is one trace from the request that started it to its last step.
    """
    made = tracer()
    if made is None:
        return UNTRACED
    return AttemptSpan(
        made.start_span(
            "workflow.step",
            context=context_of(traceparent),
            attributes=attributes(),
            record_exception=False,
            set_status_on_exception=False,
        )
    )


def external_attempt_span(
    traceparent: str,
    attributes: Callable[[], Attributes],
    *,
    started_ns: int,
    outcome: str,
    error: BaseException | None = None,
) -> None:
    """The ``workflow.step`` span of an attempt an external worker made, recorded when
    it reports the end (``started_ns``: when it was claimed, in ns since the epoch)."""
    made = tracer()
    if made is None:
        return
    span = made.start_span(
        "workflow.step",
        context=context_of(traceparent),
        attributes=attributes(),
        start_time=started_ns,
    )
    AttemptSpan(span).ended(outcome, error)
    span.end()


class DeliverySpan:
    """The client span of one webhook POST, for its sender to say what came back."""

    __slots__ = ("_span",)

    def __init__(self, span: Any = None) -> None:
        self._span = span

    def inject(self, headers: dict[str, str]) -> None:
        """Add the W3C trace headers, so a traced receiver continues the run's trace."""
        if self._span is None:
            return
        from opentelemetry.propagate import inject

        inject(headers)

    def answered(self, status: int | None, error: str = "") -> None:
        """Record the response's status code, or the error that left none."""
        if self._span is None:
            return
        if status is not None:
            self._span.set_attribute("http.response.status_code", status)
        if error or status is None or status >= 400:
            trace = api()
            assert trace is not None
            self._span.set_attribute("error.type", str(status) if status else "network")
            self._span.set_status(trace.Status(trace.StatusCode.ERROR, error or str(status)))


@contextmanager
def delivery_span(
    traceparent: Callable[[], str], url: str, attributes: Attributes
) -> Iterator[DeliverySpan]:
    """A ``POST`` client span (the HTTP semantic conventions) under the run's trace, for
    a webhook delivery about one of its events; ``traceparent`` reads the run's (only
    when traced)."""
    made = tracer()
    trace = api()
    if made is None or trace is None:
        yield DeliverySpan()
        return
    parts = urlsplit(url)
    with made.start_as_current_span(
        "POST",
        context=context_of(traceparent()),
        kind=trace.SpanKind.CLIENT,
        attributes={
            "http.request.method": "POST",
            "url.full": url,
            "server.address": parts.hostname or "",
            "server.port": parts.port or (443 if parts.scheme == "https" else 80),
            **attributes,
        },
    ) as span:
        yield DeliverySpan(span)


def note_decision(
    name: str, traceparent: Callable[[], str], attributes: Callable[[], Attributes]
) -> None:
    """Record a decision about a run (a signal sent, a gate approved or rejected) as a
    span event ``name``: on the caller's current span, linked to the run's trace; when
    the caller has none, on a short ``workflow.decision`` span in the run's trace.
    ``traceparent``: reads the run's (only when traced)."""
    made = tracer()
    trace = api()
    if made is None or trace is None:
        return
    current = trace.get_current_span()
    run_context = context_of(traceparent())
    if current.is_recording():
        current.add_event(name, attributes())
        if run_context is not None:
            current.add_link(trace.get_current_span(run_context).get_span_context())
        return
    with made.start_as_current_span("workflow.decision", context=run_context) as span:
        span.add_event(name, attributes())
