"""One side of a two-process race: call a verb the instant the test says "go".

The test starts two of these (:func:`tests.acceptance.harness.race`), each with the
calls of its side, one per round. Each sets Django up and opens its database connection
once, writes ``DIR/ready-NAME``, then for round ``i`` polls for ``DIR/go-i`` every
millisecond, makes call ``i`` and writes its outcome to ``DIR/out-i-NAME`` (also
printed as one JSON line). The test creates ``go-i`` once both sides are ready and have
finished round ``i - 1``, so the two calls of a round start together, as two web or
worker processes of a deployment would, and one start-up serves every round.

A call is three words: ``cancel_flow FLOW POLICY``, ``revoke_lease STEP_ID ATTEMPT``
(pinned to that attempt), ``claim_step STEP_ID OWNER`` (a worker starting the next
attempt), ``run_step STEP_ID OWNER`` (a worker claiming the step and running its
attempt to its end, an await's parking included), ``send_signal RUN NAME``,
``claim_external QUEUE WORKER`` (an outside worker claiming up to :data:`CLAIM_LIMIT`
units), ``heartbeat STEP_ID OWNER/ATTEMPT/VERSION`` (the worker holding that attempt
renewing its lease, as it held it) or ``reclaim STEP_ID NOW`` (the lease scanner taking
the step back, its clock ``NOW``: an ISO time, or ``db`` for the database's). An
outcome is ``{"round", "verb", "result"}``, or ``{"round", "verb", "error": {"class",
"code", "message", "workflow_error"}}`` for an exception: ``workflow_error``
tells a clean :class:`~workflows.errors.WorkflowError` from a defect.
``--import`` names modules whose workflows this process must know (the engine tests'
workflows, which only pytest's process imports otherwise).
"""

from __future__ import annotations

import importlib
import json
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

import workflows
from tests.acceptance.flowapp.management.starting_line import wait_for_file
from workflows.definitions import registry
from workflows.engine import STEP, claim_step, heartbeat, reclaim
from workflows.engine.lease import Lease
from workflows.errors import WorkflowError
from workflows.models import Step
from workflows.workers.runner import execute_step

GO_POLL_SECONDS = 0.001


def _cancel_flow(flow: str, policy: str, reason: str, user: Any) -> dict[str, Any]:
    return workflows.cancel_flow(UUID(flow), policy, reason=reason, user=user).as_dict()


def _revoke_lease(step: str, attempt: str, reason: str, user: Any) -> dict[str, Any]:
    result = workflows.revoke_lease(
        int(step), expected_attempt=int(attempt), reason=reason, user=user
    )
    return {"revoked": result.revoked, "reason": result.reason, "attempt": result.attempt}


def _claim_step(step: str, owner: str, reason: str, user: Any) -> dict[str, Any]:
    lease = claim_step(int(step), owner)
    return {"attempt": lease.attempt, "owner": lease.owner}


def _claim_external(queue: str, worker: str, reason: str, user: Any) -> dict[str, Any]:
    jobs = workflows.claim_external([queue], worker=worker, limit=CLAIM_LIMIT)
    return {"jobs": [[str(job.run), job.step, job.attempt] for job in jobs]}


# How many units one ``claim_external`` call of a race takes at most.
CLAIM_LIMIT = 3


def _run_step(step: str, owner: str, reason: str, user: Any) -> dict[str, Any]:
    return {"attempts": execute_step(int(step), owner=owner, chain=False)}


def _send_signal(run: str, name: str, reason: str, user: Any) -> dict[str, Any]:
    return {"signal": workflows.send_signal(UUID(run), name, {"by": reason}, user=user).pk}


def _heartbeat(step: str, held: str, reason: str, user: Any) -> dict[str, Any]:
    owner, attempt, version = held.rsplit("/", 2)
    row = Step.objects.select_related("run").get(pk=int(step))
    lease = Lease(
        kind=STEP,
        unit_id=row.pk,
        run_id=row.run_id,
        step_id=row.pk,
        step_name=row.name,
        owner=owner,
        workflow=registry.get(row.run.workflow_name, row.run.workflow_version),
        run_input=row.run.input,
        handler_path="",
        attempt=int(attempt),
        max_attempts=row.max_attempts,
        version=int(version),
    )
    heartbeat(lease)
    return {"renewed": True}


def _reclaim(step: str, now: str, reason: str, user: Any) -> dict[str, Any]:
    clock = None if now == "db" else datetime.fromisoformat(now)
    return {"status": reclaim(STEP, int(step), now=clock)}


VERBS: dict[str, Callable[[str, str, str, Any], dict[str, Any]]] = {
    "cancel_flow": _cancel_flow,
    "claim_external": _claim_external,
    "revoke_lease": _revoke_lease,
    "claim_step": _claim_step,
    "heartbeat": _heartbeat,
    "reclaim": _reclaim,
    "run_step": _run_step,
    "send_signal": _send_signal,
}


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "class": type(exc).__name__,
        "code": getattr(exc, "code", None),
        "message": str(exc),
        "workflow_error": isinstance(exc, WorkflowError),
    }


class Command(BaseCommand):
    help = "Write DIR/ready-NAME; for each call i: wait for DIR/go-i, call, write DIR/out-i-NAME."
    requires_system_checks: list[str] = []  # pytest's process ran them; start quickly

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("directory")
        parser.add_argument("name")
        parser.add_argument("calls", nargs="+", help="VERB FIRST SECOND, once per round")
        parser.add_argument("--reason", default="")
        parser.add_argument("--user", default="", help="username of the acting user")
        parser.add_argument("--import", dest="modules", action="append", default=[])
        parser.add_argument("--deadline", type=float, default=60.0, help="seconds per go")

    def handle(
        self,
        *args: Any,
        directory: str,
        name: str,
        calls: list[str],
        reason: str,
        user: str,
        modules: list[str],
        deadline: float,
        **_: Any,
    ) -> None:
        if len(calls) % 3 or any(verb not in VERBS for verb in calls[::3]):
            raise CommandError(f"calls are VERB FIRST SECOND with VERB in {sorted(VERBS)}")
        for module in modules:
            importlib.import_module(module)
        actor = get_user_model().objects.get(username=user) if user else None
        connection.ensure_connection()
        here = Path(directory)
        (here / f"ready-{name}").write_text("ready")
        for round_, start in enumerate(range(0, len(calls), 3)):
            verb, first, second = calls[start : start + 3]
            go = here / f"go-{round_}"
            give_up_at = time.monotonic() + deadline
            wait_for_file(go, give_up_at=give_up_at, deadline=deadline, every=GO_POLL_SECONDS)
            outcome: dict[str, Any] = {"round": round_, "verb": verb}
            try:
                outcome["result"] = VERBS[verb](first, second, reason, actor)
            except Exception as exc:
                traceback.print_exc()
                outcome["error"] = _error(exc)
            line = json.dumps(outcome)
            self.stdout.write(line)
            # Written whole, then renamed: the test never reads half an outcome.
            partial = here / f".out-{round_}-{name}"
            partial.write_text(line)
            partial.rename(here / f"out-{round_}-{name}")
