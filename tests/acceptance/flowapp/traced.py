"""The traces test's workflows (tests/acceptance/test_traces_processes.py): a parent with
a child run, whose step makes a span of its own as an instrumented HTTP client would."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from workflows import SubWorkflow, Task, Workflow

CALLS_OUT = f"{__name__}.calls_out"
# Within the acceptance settings' django-q2 timeout (system check workflows.E005).
TIMEOUT = timedelta(seconds=5)
NOTE = f"{__name__}.note"


def note(ctx: Any) -> str:
    return ctx.step_name


def calls_out(ctx: Any) -> str:
    from opentelemetry import trace

    with trace.get_tracer("acceptance.http").start_as_current_span("GET /stock"):
        return "in stock"


class TracedOrder(Workflow):
    name = "acceptance_traced_order"
    reserve = Task(NOTE, timeout=TIMEOUT)
    check_stock = SubWorkflow("acceptance_traced_stock")
    ship = Task(NOTE, timeout=TIMEOUT)


class TracedStock(Workflow):
    name = "acceptance_traced_stock"
    ask = Task(CALLS_OUT, timeout=TIMEOUT)
