"""Running handler code for one step, outside any transaction, fenced by its lease."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from typing import Any

from workflows.conf import workflow_settings
from workflows.context import Context
from workflows.engine import Lease, claim_step, complete_step, fail_attempt, heartbeat
from workflows.errors import DefinitionMissing, LeaseLost, PermanentError, StaleState

logger = logging.getLogger("workflows.runner")


def worker_id() -> str:
    """Name this worker thread in lease columns: host, process and thread."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def execute_step(step_id: int, *, owner: str | None = None, chain: bool = True) -> int:
    """Claim and run a ready step; with ``chain``, keep going with the steps it releases.

    Chaining stops once this call has been busy for ``CHAIN_BUDGET``: the next step is
    then left ``ready`` for the queue, so one queue task never runs long enough for the
    queue to think its worker died. Returns how many step attempts this call ran. A step
    that another worker claimed first, or that is no longer ready, is not an error: it
    returns 0.
    """
    owner = owner or worker_id()
    try:
        lease: Lease | None = claim_step(step_id, owner)
    except (StaleState, DefinitionMissing) as exc:
        logger.debug("step %s not claimed: %s", step_id, exc)
        return 0
    deadline = time.monotonic() + workflow_settings.CHAIN_BUDGET.total_seconds()
    attempts = 0
    while lease is not None:
        attempts += 1
        lease = run_attempt(lease, chain=chain and time.monotonic() < deadline)
    return attempts


def run_attempt(lease: Lease, *, chain: bool = True) -> Lease | None:
    """Run the handler of a claimed step and record its outcome.

    Returns the lease of the next step when ``chain`` claimed one in the same
    transaction as this step's completion.
    """
    ctx = Context(
        run_id=lease.run_id,
        input=lease.run_input,
        step_names=tuple(lease.workflow.nodes),
        step_name=lease.step_name,
        attempt=lease.attempt,
        heartbeat=lambda: heartbeat(lease),
    )
    try:
        output = checked_output(lease.node.resolve_handler()(ctx))
    except LeaseLost as lost:
        logger.warning("%s", lost)
        return None
    except Exception as exc:
        try:
            fail_attempt(lease, exc)
        except LeaseLost as lost:
            logger.warning("%s", lost)
        return None
    try:
        return complete_step(lease, output, claim_next=chain)
    except LeaseLost as lost:
        logger.warning("%s", lost)
        return None


def checked_output(output: Any) -> Any:
    """Return ``output`` if it survives a JSON round trip unchanged, else fail for good."""
    try:
        encoded = json.dumps(output, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise PermanentError(
            f"handler returned output that is not JSON-serialisable: {exc}"
        ) from exc
    if json.loads(encoded) != output:
        raise PermanentError(
            "handler returned output that changes in a JSON round trip "
            "(tuples, non-string keys?); return plain lists and dicts"
        )
    return output
