"""Traces across real processes: a run started inside a web request's span in one
process and run by a worker cluster in another is one trace.

The starting process (``acceptance_start --in-span``) opens a server span, as a traced
web request does, and starts an order whose middle step is a child run; the workers run
every attempt. Each process records its spans with the SDK into one file (``tests/
support/spans.py``), and the trace read back is: the request → the order's
``workflow.start`` → its attempts and the child's ``workflow.start`` → the child's
attempt → the span its handler made, all with one trace id, each made in the process
that did the work.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import pytest

from tests.acceptance.harness import read_json_line
from tests.acceptance.stack import Stack
from tests.support.spans import SPAN_FILE_ENV, RecordedSpan, read_span_file, span_tree

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT = 120.0
# The request, two starts, three attempts and the handler's own call.
EXPECTED_SPANS = 7


def test_a_run_started_in_a_request_is_one_trace_across_processes(stack: Stack, tmp_path: Path):
    span_file = tmp_path / "spans.jsonl"
    env = {SPAN_FILE_ENV: str(span_file)}
    workers = stack.qcluster(workers=2, env=env)
    out = stack.processes.run(
        "start",
        "acceptance_start",
        "acceptance_traced_order",
        "[{}]",
        "--in-span",
        "POST /orders",
        env=env,
    )
    starter = stack.processes.started[-1].pid
    [run_id] = [UUID(value) for value in read_json_line(out)]
    run = stack.wait_finished([run_id], timeout=RUN_TIMEOUT)[run_id]
    assert run.status == "completed"
    # An attempt's span ends once its completion committed: just after the run ended.
    stack.wait_for(
        "every span to be written",
        lambda: len(read_span_file(span_file)) >= EXPECTED_SPANS,
        timeout=30,
    )
    spans = read_span_file(span_file)
    tree = span_tree(spans)
    assert len(spans) == EXPECTED_SPANS, tree
    assert len({span.trace_id for span in spans}) == 1, tree

    def one(name: str, **attributes: str) -> RecordedSpan:
        (found,) = [
            span
            for span in spans
            if span.name == name
            and all(span.attributes.get(f"flowsite.{k}") == v for k, v in attributes.items())
        ]
        return found

    request = one("POST /orders")
    order = one("workflow.start", **{"workflow.name": "acceptance_traced_order"})
    stock = one("workflow.start", **{"workflow.name": "acceptance_traced_stock"})
    reserve = one("workflow.step", **{"step.name": "reserve"})
    ship = one("workflow.step", **{"step.name": "ship"})
    ask = one("workflow.step", **{"step.name": "ask"})
    call = one("GET /stock")
    assert (request.parent_id, request.kind, request.pid) == ("", "SERVER", starter)
    assert (order.parent_id, order.pid) == (request.span_id, starter)
    assert order.attributes["flowsite.run.id"] == str(run_id)
    worker_pids = set(workers.descendants())
    for attempt in (reserve, ship):
        assert attempt.parent_id == order.span_id
        assert attempt.pid in worker_pids
        assert attempt.attributes["flowsite.outcome"] == "completed"
    # The child run starts in the worker that finished "reserve", under its parent's start.
    assert (stock.parent_id, stock.pid in worker_pids) == (order.span_id, True)
    assert (ask.parent_id, ask.pid in worker_pids) == (stock.span_id, True)
    assert (call.parent_id, call.pid) == (ask.span_id, ask.pid)
