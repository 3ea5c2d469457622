"""Graph evaluation: what becomes ready, waiting or skipped after a step settles.

Runs inside the transition that settled the step, so a step's completion and the
release of its downstream steps commit together or not at all.
"""

from __future__ import annotations

import traceback
from datetime import datetime
from typing import Any

from django.utils import timezone

from workflows.context import Context
from workflows.definitions import Node, Sleep, Task, Workflow
from workflows.engine.attempts import begin_attempt
from workflows.engine.events import EventLog
from workflows.engine.lease import Lease
from workflows.engine.runs import fail_run, settle_run, step_failure
from workflows.engine.sql import StepRow, cas_update, db_now, step_rows
from workflows.errors import StaleState
from workflows.models import Run, Step, Timer
from workflows.status import RUN_ACTIVE, STEP_FINAL, RunStatus, StepStatus, TimerKind


def error_from_exception(exc: BaseException, **extra: Any) -> dict[str, Any]:
    """Describe an exception as the JSON stored in ``error`` columns."""
    return {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc) or type(exc).__name__,
        "traceback": "".join(traceback.format_exception(exc))[-4000:],
        **extra,
    }


class Advancer:
    """Releases the steps that a transition made reachable and settles the run.

    ``claim_owner``: when given, the first task that becomes ready is claimed at once for
    that worker (``ready → running`` in the same transaction), so a worker finishing a
    step continues with the next one without a queue round trip.
    """

    def __init__(
        self,
        run: Run,
        workflow: type[Workflow],
        events: EventLog,
        *,
        claim_owner: str | None = None,
    ) -> None:
        self.run = run
        self.workflow = workflow
        self.events = events
        self.claim_owner = claim_owner
        self.claimed: Lease | None = None
        self.ready_step_ids: list[int] = []
        self._in_hand = False
        self._context: Context | None = None

    @property
    def context(self) -> Context:
        if self._context is None:
            self._context = Context(
                run_id=self.run.pk,
                input=self.run.input,
                step_names=tuple(self.workflow.nodes),
            )
        return self._context

    def start(self) -> None:
        """Enter the root steps of a new run and settle it."""
        roots = self.workflow.graph.roots
        for row in sorted(step_rows(self.run.pk, roots), key=lambda row: roots.index(row.name)):
            self._consider(row, upstream_statuses=[])
        self.finish()

    def settled(self, step_name: str) -> None:
        """Release what depends on ``step_name``, which just completed or was skipped."""
        pending_names = [step_name]
        while pending_names and self.run.status in RUN_ACTIVE:
            candidates = [
                down for name in pending_names for down in self.workflow.graph.downstream[name]
            ]
            pending_names = []
            if not candidates:
                break
            upstream = self.workflow.graph.upstream
            needed = set(candidates).union(*(upstream[name] for name in candidates))
            rows = {row.name: row for row in step_rows(self.run.pk, needed)}
            for name in dict.fromkeys(candidates):
                row = rows[name]
                if row.status != StepStatus.PENDING:
                    continue
                statuses = [rows[up].status for up in upstream[name]]
                if self._consider(row, statuses) == StepStatus.SKIPPED:
                    pending_names.append(name)

    def release_stranded(self) -> None:
        """Enter pending steps whose upstreams are all final (repair after a crash)."""
        upstream = self.workflow.graph.upstream
        rows = {row.name: row for row in step_rows(self.run.pk, self.workflow.nodes)}
        for name, row in rows.items():
            if self.run.status not in RUN_ACTIVE or row.status != StepStatus.PENDING:
                continue
            statuses = [rows[up].status for up in upstream[name]]
            if self._consider(row, statuses) == StepStatus.SKIPPED:
                self.settled(name)

    def mark_in_hand(self) -> None:
        """Note that this transition made a step ready outside :meth:`settled`."""
        self._in_hand = True

    def finish(self) -> None:
        """Settle the run's status; skipped when this transition put work in hand."""
        if self._in_hand and self.run.status == RunStatus.RUNNING:
            return
        settle_run(self.run, self.workflow.graph.sinks, self.events)

    def fail(self, step: StepRow, error: dict[str, Any]) -> None:
        """Fail the run because ``step`` failed for good."""
        fail_run(self.run, step_failure(step.name, error), self.events)

    # -- entering one step ------------------------------------------------------------

    def _consider(self, row: StepRow, upstream_statuses: list[str]) -> str | None:
        """Enter ``row`` if its upstreams allow it; return the status it moved to."""
        if any(status not in STEP_FINAL for status in upstream_statuses):
            return None
        if any(
            status not in (StepStatus.COMPLETED, StepStatus.SKIPPED) for status in upstream_statuses
        ):
            return None  # an upstream failed or was cancelled: the run is failing
        node = self.workflow.nodes[row.name]
        if upstream_statuses and all(s == StepStatus.SKIPPED for s in upstream_statuses):
            return self._skip(row, "every upstream step was skipped")
        if node.when is not None:
            try:
                wanted = bool(node.when(self.context))
            except Exception as exc:
                self._fail_entering(row, exc, "condition_error")
                return StepStatus.FAILED
            if not wanted:
                return self._skip(row, "when= condition is false")
        return self._enter(row, node)

    def _enter(self, row: StepRow, node: Node) -> str:
        if isinstance(node, Task):
            return self._enter_task(row, node)
        if isinstance(node, Sleep):
            return self._enter_sleep(row, node)
        raise TypeError(f"no engine support for node kind {node.kind!r}")  # pragma: no cover

    def _enter_task(self, row: StepRow, node: Task) -> str:
        self._in_hand = True
        if self.claim_owner is not None and self.claimed is None:
            self.claimed = begin_attempt(
                row,
                run_id=self.run.pk,
                run_input=self.run.input,
                workflow=self.workflow,
                owner=self.claim_owner,
                events=self.events,
            )
            if self.claimed is None:
                raise StaleState(f"step {row.name!r} of run {self.run.pk} changed while claimed")
            return StepStatus.RUNNING
        self._move(row, StepStatus.READY)
        self.events.add(self.run.pk, "step.ready", step_id=row.pk)
        self.ready_step_ids.append(row.pk)
        return StepStatus.READY

    def _enter_sleep(self, row: StepRow, node: Sleep) -> str:
        now = timezone.now()
        try:
            wake_at: datetime = node.wake_at(self.context, now)
        except Exception as exc:
            self._fail_entering(row, exc, "sleep_error")
            return StepStatus.FAILED
        self._move(row, StepStatus.WAITING, started_at=db_now())
        Timer.objects.create(
            run_id=self.run.pk, step_id=row.pk, kind=TimerKind.SLEEP, due_at=wake_at
        )
        self.events.add(
            self.run.pk, "step.waiting", step_id=row.pk, reason="sleep", until=wake_at.isoformat()
        )
        return StepStatus.WAITING

    def _skip(self, row: StepRow, reason: str) -> str:
        self._move(row, StepStatus.SKIPPED, finished_at=db_now())
        self.events.add(self.run.pk, "step.skipped", step_id=row.pk, reason=reason)
        return StepStatus.SKIPPED

    def _fail_entering(self, row: StepRow, exc: Exception, code: str) -> None:
        error = error_from_exception(exc, code=code)
        self._move(row, StepStatus.FAILED, error=error, finished_at=db_now())
        self.events.add(self.run.pk, "step.failed", step_id=row.pk, code=code)
        self.fail(row, error)

    def _move(self, row: StepRow, status: str, **changes: Any) -> None:
        if not cas_update(
            Step,
            row.pk,
            version=row.version,
            where={"status": row.status},
            status=status,
            updated_at=db_now(),
            **changes,
        ):
            raise StaleState(
                f"step {row.name!r} of run {self.run.pk} changed while moving "
                f"{row.status} → {status}",
                step=row.name,
            )
        row.status = status
        row.version += 1
