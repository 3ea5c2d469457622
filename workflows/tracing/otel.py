"""Where Flowsite reaches the OpenTelemetry API: once, lazily, and only if it is there.

:func:`tracer` answers ``None`` (make no span) when the API is not installed, when
``WORKFLOWS["TRACING"]`` is off, or when no SDK has set a tracer provider: the API's own
proxy provider then hands out no-op spans, and skipping them spares every step the cost
of building attributes and contexts nobody records. The import is attempted on the first
call, never at module import, so a project without the extra imports nothing of it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from workflows.conf import workflow_settings

# The instrumentation scope every Flowsite span is made under.
SCOPE = "flowsite.workflows"

_api: ModuleType | None = None
_absent = False


def api() -> ModuleType | None:
    """``opentelemetry.trace``, or ``None`` when the API is not installed."""
    global _api, _absent
    if _api is None and not _absent:
        try:
            from opentelemetry import trace
        except ImportError:
            _absent = True
        else:
            _api = trace
    return _api


# The last provider asked and the tracer it gave: an SDK makes a new tracer object at
# each ``get_tracer``, a cost every span would pay again.
_made: tuple[Any, Any] = (None, None)


def tracer() -> Any | None:
    """The tracer to make Flowsite's spans with, or ``None`` when none would be recorded."""
    global _made
    trace = api()
    if trace is None or not workflow_settings.TRACING:
        return None
    provider = trace.get_tracer_provider()
    if provider is _made[0]:
        return _made[1]
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    _made = (provider, provider.get_tracer(SCOPE))
    return _made[1]
