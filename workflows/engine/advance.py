"""Graph evaluation: what becomes ready, waiting or skipped after a step settles.

Runs inside the transition that settled the step, so a step's completion and the
release of its downstream steps commit together or not at all. Entering each kind of
node is delegated to the module of that kind (gates, signals, children, items).
"""

from __future__ import annotations

import traceback
from datetime import datetime
from typing import Any

from django.utils import timezone

from workflows.context import Context
from workflows.definitions import (
    FanOut,
    Gate,
    Node,
    Sleep,
    SubWorkflow,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.engine import children, gates, items, signals
from workflows.engine.attempts import begin_attempt
from workflows.engine.events import EventLog
from workflows.engine.lease import Lease
from workflows.engine.runs import fail_run, settle_run, step_failure, unwind
from workflows.engine.sql import StepRow, cas_update, db_now, step_rows
from workflows.errors import StaleState
from workflows.executors import Work
from workflows.models import Run, Step, Timer
from workflows.status import RUN_ACTIVE, STEP_FINAL, RunStatus, StepStatus, TimerKind

# A step that settles while being entered lets its downstream steps move on at once.
_SETTLED = (StepStatus.COMPLETED, StepStatus.SKIPPED)


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
        self.ready_work: list[Work] = []
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
            if self.run.status in RUN_ACTIVE and self._consider(row, []) in _SETTLED:
                self.settled(row.name)
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
                if row.status != StepStatus.PENDING or self.run.status not in RUN_ACTIVE:
                    continue
                statuses = [rows[up].status for up in upstream[name]]
                if self._consider(row, statuses) in _SETTLED:
                    pending_names.append(name)

    def release_stranded(self) -> None:
        """Enter pending steps whose upstreams are all final (repair after a crash)."""
        upstream = self.workflow.graph.upstream
        rows = {row.name: row for row in step_rows(self.run.pk, self.workflow.nodes)}
        for name, row in rows.items():
            if self.run.status not in RUN_ACTIVE or row.status != StepStatus.PENDING:
                continue
            statuses = [rows[up].status for up in upstream[name]]
            if self._consider(row, statuses) in _SETTLED:
                self.settled(name)

    def mark_in_hand(self) -> None:
        """Note that this transition put work in hand outside :meth:`settled`."""
        self._in_hand = True

    def dispatch(self, kind: str, unit_id: int) -> None:
        """Queue a unit of ready work once this transition commits its state."""
        self._in_hand = True
        self.ready_work.append((kind, unit_id))

    def finish(self) -> None:
        """Settle the run's status (or move an unwinding run on)."""
        if self.run.status in RUN_ACTIVE:
            if not (self._in_hand and self.run.status == RunStatus.RUNNING):
                settle_run(self.run, self.workflow.graph.sinks, self.events)
        else:
            unwind(self.run, self.events)

    def fail(self, step_name: str, error: dict[str, Any]) -> None:
        """Fail the run because ``step_name`` failed for good."""
        fail_run(self.run, step_failure(step_name, error), self.events)

    # -- entering one step ------------------------------------------------------------

    def _consider(self, row: StepRow, upstream_statuses: list[str]) -> str | None:
        """Enter ``row`` if its upstreams allow it; return the status it moved to."""
        if any(status not in STEP_FINAL for status in upstream_statuses):
            return None
        if any(status not in _SETTLED for status in upstream_statuses):
            return None  # an upstream failed or was cancelled: the run is failing
        node = self.workflow.nodes[row.name]
        if upstream_statuses and all(s == StepStatus.SKIPPED for s in upstream_statuses):
            return self._skip(row, "every upstream step was skipped")
        if node.when is not None:
            try:
                wanted = bool(node.when(self.context))
            except Exception as exc:
                return self.fail_entering(row, exc, "condition_error")
            if not wanted:
                return self._skip(row, "when= condition is false")
        return self._enter(row, node)

    def _enter(self, row: StepRow, node: Node) -> str:
        if isinstance(node, FanOut):
            return items.enter_fanout(self, row, node)
        if isinstance(node, Task):
            return self._enter_task(row)
        if isinstance(node, Sleep):
            return self._enter_sleep(row, node)
        if isinstance(node, Gate):
            return gates.enter_gate(self, row, node)
        if isinstance(node, WaitForSignal):
            return signals.enter_wait(self, row, node)
        if isinstance(node, SubWorkflow):
            return children.enter_subworkflow(self, row, node)
        raise TypeError(f"no engine support for node kind {node.kind!r}")  # pragma: no cover

    def _enter_task(self, row: StepRow) -> str:
        self._in_hand = True
        if self.claim_owner is not None and self.claimed is None:
            self.claimed = begin_attempt(
                Step,
                row,
                Lease(
                    step_id=row.pk,
                    run_id=self.run.pk,
                    step_name=row.name,
                    attempt=0,
                    owner=self.claim_owner,
                    version=0,
                    workflow=self.workflow,
                    run_input=self.run.input,
                ),
                self.events,
            )
            if self.claimed is None:
                raise StaleState(f"step {row.name!r} of run {self.run.pk} changed while claimed")
            return StepStatus.RUNNING
        self.move(row, StepStatus.READY)
        self.events.add(self.run.pk, "step.ready", step_id=row.pk)
        self.ready_work.append(("step", row.pk))
        return StepStatus.READY

    def _enter_sleep(self, row: StepRow, node: Sleep) -> str:
        try:
            wake_at: datetime = node.wake_at(self.context, timezone.now())
        except Exception as exc:
            return self.fail_entering(row, exc, "sleep_error")
        self.park(row, TimerKind.SLEEP, wake_at, reason="sleep", until=wake_at.isoformat())
        return StepStatus.WAITING

    # -- helpers for the node kinds -----------------------------------------------------

    def park(self, row: StepRow, kind: str, due_at: datetime | None, **payload: Any) -> None:
        """Set the step ``waiting`` (with a timer when ``due_at`` is given)."""
        changes = payload.pop("changes", {})
        self.move(row, StepStatus.WAITING, started_at=db_now(), **changes)
        if due_at is not None:
            Timer.objects.create(run_id=self.run.pk, step_id=row.pk, kind=kind, due_at=due_at)
        self.events.add(self.run.pk, "step.waiting", step_id=row.pk, **payload)

    def complete(self, row: StepRow, output: Any, **payload: Any) -> str:
        """Complete a step that needs no worker (a consumed signal, a decided gate)."""
        self.move(row, StepStatus.COMPLETED, output=output, finished_at=db_now())
        self.events.add(self.run.pk, "step.completed", step_id=row.pk, **payload)
        return StepStatus.COMPLETED

    def _skip(self, row: StepRow, reason: str) -> str:
        self.move(row, StepStatus.SKIPPED, finished_at=db_now())
        self.events.add(self.run.pk, "step.skipped", step_id=row.pk, reason=reason)
        return StepStatus.SKIPPED

    def fail_entering(self, row: StepRow, exc: Exception, code: str) -> str:
        """Fail a step that could not even start (bad condition, prompt, items...)."""
        error = error_from_exception(exc, code=code)
        self.move(row, StepStatus.FAILED, error=error, finished_at=db_now())
        self.events.add(self.run.pk, "step.failed", step_id=row.pk, code=code)
        self.fail(row.name, error)
        return StepStatus.FAILED

    def move(self, row: StepRow, status: str, **changes: Any) -> None:
        """Compare-and-set ``row`` from its current status to ``status``."""
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
