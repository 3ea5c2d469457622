"""Graph evaluation: what becomes ready, waiting or skipped after a step settles.

Runs inside the transition that settled the step, so a step's completion and the
release of its downstream steps commit together or not at all. Entering a node is
looked up by the node's type in :data:`NODE_ENTRIES`, which each node module fills with
:func:`enters` (tasks, sleeps, gates, signals, child workflows, fan-outs): this module
imports none of them, so a new kind of node is a new module, not an edit here.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from workflows.context import Context
from workflows.definitions import Node, Workflow
from workflows.engine.events import EventLog
from workflows.engine.runs import fail_run, settle_run, step_failure, unwind
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow, step_rows
from workflows.engine.sql.updates import move_row
from workflows.engine.wakeups import timer_armed
from workflows.engine.work_kinds import WorkKind
from workflows.models import Run, Step, Timer
from workflows.status import RUN_ACTIVE, STEP_FINAL, RunStatus, StepStatus

if TYPE_CHECKING:
    from workflows.engine.scope import RunScope

# A step that settles while being entered lets its downstream steps move on at once.
_SETTLED = (StepStatus.COMPLETED, StepStatus.SKIPPED)

# Entering a node: (advancer, the step's row, the node) -> the status the step moved to.
EnterNode = Callable[["Advancer", StepRow, Any], str]
NODE_ENTRIES: dict[type[Node], EnterNode] = {}


def enters(node_type: type[Node]) -> Callable[[EnterNode], EnterNode]:
    """Register the function that enters steps of ``node_type`` (and its subclasses)."""

    def register(enter: EnterNode) -> EnterNode:
        NODE_ENTRIES[node_type] = enter
        return enter

    return register


def error_from_exception(exc: BaseException, **extra: Any) -> dict[str, Any]:
    """Describe an exception as the JSON stored in ``error`` columns."""
    return {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc) or type(exc).__name__,
        "traceback": "".join(traceback.format_exception(exc))[-4000:],
        **extra,
    }


class Advancer:
    """Releases the steps that a transition made reachable and settles the run."""

    def __init__(self, scope: RunScope) -> None:
        self.scope = scope
        self._in_hand = False
        self._finished = False
        self._context: Context | None = None

    @property
    def run(self) -> Run:
        return self.scope.run

    @property
    def workflow(self) -> type[Workflow]:
        return self.scope.workflow

    @property
    def events(self) -> EventLog:
        return self.scope.events

    @property
    def context(self) -> Context:
        if self._context is None:
            self._context = Context(
                run_id=self.run.pk,
                input=self.run.input,
                step_names=tuple(self.workflow.nodes),
            )
        return self._context

    def context_for(self, row: StepRow) -> Context:
        """A context for a condition asked about ``row`` (its ``when=``, a loop's
        ``while_``, a poll's ``repeat_until``): ``ctx.iteration`` is the row's; the step
        outputs read are shared with every other condition of this transition."""
        shared = self.context
        context = Context(
            run_id=self.run.pk,
            input=self.run.input,
            step_names=(),
            step_name=row.name,
            iteration=row.iteration,
        )
        context.steps, context.upstream = shared.steps, shared.upstream
        return context

    def forget_context(self) -> None:
        """Read step outputs afresh: a loop just reset the steps they came from."""
        self._context = None

    def start(self) -> None:
        """Enter the root steps of a new run."""
        roots = self.workflow.graph.roots
        for row in sorted(step_rows(self.run.pk, roots), key=lambda row: roots.index(row.name)):
            if self.run.status in RUN_ACTIVE and self._consider(row, []) in _SETTLED:
                self.settled(row.name)

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
        self.release(self.workflow.nodes)

    def release(self, names: Iterable[str]) -> None:
        """Enter those of ``names`` that are pending with every upstream final (a loop's
        ``back_to`` once its body was reset)."""
        upstream = self.workflow.graph.upstream
        names = list(names)
        needed = set(names).union(*(upstream[name] for name in names))
        rows = {row.name: row for row in step_rows(self.run.pk, needed)}
        for name in names:
            row = rows[name]
            if self.run.status not in RUN_ACTIVE or row.status != StepStatus.PENDING:
                continue
            statuses = [rows[up].status for up in upstream[name]]
            if self._consider(row, statuses) in _SETTLED:
                self.settled(name)

    def mark_in_hand(self) -> None:
        """Note that this transition put work in hand (ready, claimed or a child run)."""
        self._in_hand = True

    def dispatch(self, kind: WorkKind, unit_id: int, step: str) -> None:
        """Queue a unit of ready work of ``step`` once this transition commits its state."""
        self._in_hand = True
        self.scope.dispatch(kind, unit_id, self.workflow.route_of(step))

    def finish(self) -> None:
        """Settle the run's status (or move an unwinding run on); once per transition."""
        if self._finished:
            return
        self._finished = True
        if self.run.status in RUN_ACTIVE:
            if not (self._in_hand and self.run.status == RunStatus.RUNNING):
                settle_run(self.run, self.workflow.graph.sinks, self.events)
        else:
            unwind(self.run, self.events)

    def fail(self, step_name: str, error: dict[str, Any]) -> None:
        """Fail the run because ``step_name`` failed for good (this also unwinds it)."""
        self.fail_run(step_failure(step_name, error))

    def fail_run(self, error: dict[str, Any]) -> None:
        """Fail the run with ``error`` as its own (a loop that ran out of iterations)."""
        fail_run(self.run, error, self.events)
        self._finished = True

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
                wanted = bool(node.when(self.context_for(row)))
            except Exception as exc:
                return self.fail_entering(row, exc, "condition_error")
            if not wanted:
                return self._skip(row, "when= condition is false")
        return self.entry_of(node)(self, row, node)

    @staticmethod
    def entry_of(node: Node) -> EnterNode:
        """The function that enters steps of ``node``'s type (:func:`enters`)."""
        for node_type in type(node).__mro__:
            if node_type in NODE_ENTRIES:
                return NODE_ENTRIES[node_type]
        raise TypeError(f"no engine support for node kind {node.kind!r}")

    # -- helpers for the node kinds -----------------------------------------------------

    def park(self, row: StepRow, kind: str, due_at: datetime | None, **payload: Any) -> None:
        """Set the step ``waiting`` (with a timer when ``due_at`` is given)."""
        changes = payload.pop("changes", {})
        self.move(row, StepStatus.WAITING, started_at=db_now(), **changes)
        if due_at is not None:
            Timer.objects.create(run_id=self.run.pk, step_id=row.pk, kind=kind, due_at=due_at)
            timer_armed(due_at)
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
        move_row(Step, row, status, f"step {row.name!r} of run {self.run.pk}", **changes)
