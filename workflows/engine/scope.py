"""The frame every transition on a run is written in.

A transition is one ``atomic()`` block (:func:`~workflows.engine.transaction.transition`)
that opens a :func:`run_scope`: the scope locks the run, resolves its definition once,
collects the transition's events and the work it made ready, and on the way out
settles the run, writes the events and hands the ready work to the executor. The body
of a transition supplies only what differs: the compare-and-set writes of its own rows.

::

    @transition
    def decide_gate(step_id: int, ...) -> None:
        with run_scope(run_of_step(step_id)) as scope:
            row = step_row(step_id)
            ...
            scope.advancer.settled(row.name)

A run whose (name, version) is not registered in this process is handled here and
nowhere else: if the run is active it fails with ``definition_missing`` in this
transition, which commits, and the caller gets :class:`DefinitionMissing`.

Transitions that do not lock one run first use :func:`unlocked_scope`, the same frame
without the run: a claim (it reads its unit ``SKIP LOCKED`` and must not wait for the
run, whose lock is taken after the unit's everywhere else), a fenced heartbeat or the
record of a rejected write (they touch only the leased rows), a redispatch, and the
start of queued runs (it locks each run it takes itself, without waiting). Only this
module builds a scope or an event log (``tests/unit/test_transition_frame.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from uuid import UUID

from workflows.definitions import Workflow, registry
from workflows.definitions.limits import Route
from workflows.engine.advance import Advancer
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.engine.executor import Work
from workflows.engine.lease import Held
from workflows.engine.runs import fail_run
from workflows.engine.sql.locked_updates import RowWrite, lock_run_and_update
from workflows.engine.sql.locks import lock_run
from workflows.engine.transaction import AfterCommit, transition
from workflows.engine.work_kinds import WorkKind
from workflows.errors import DefinitionMissing
from workflows.models import Run, Step
from workflows.status import RUN_ACTIVE


class TransitionScope:
    """What every transition collects: its events and the work it made ready.

    Closing it writes the events (unless they belong to an enclosing transition's
    scope, which writes them) and hands the ready work to the executor.
    """

    def __init__(self, *, events: EventLog | None = None) -> None:
        self._owns_events = events is None
        self.events = events if events is not None else EventLog()
        self.ready_work: list[Work] = []

    def dispatch(self, kind: WorkKind, unit_id: int, route: Route) -> None:
        """Queue a unit of ready work once this transition has written its state."""
        self.ready_work.append(Work(kind, unit_id, route))

    def close(self) -> None:
        """Write the events, hand ready work to the executor.

        A nested scope leaves the events to the transition that owns them.
        """
        if self._owns_events:
            self.events.flush()
        enqueue(self.ready_work)


class RunScope(TransitionScope):
    """One transition's view of a locked run: definition, events, ready work, advancer.

    ``claim_owner``: when given, the first task or item the transition makes ready is
    claimed at once for that worker (``ready → running`` in the same transaction), so
    a worker finishing a step continues with the next one without a queue round trip;
    its lease (or, for a batched fan-out, its batch of leases) ends up in :attr:`claimed`.
    Built by :func:`run_scope`, :func:`nested_scope` and :func:`held_scope` only.
    """

    def __init__(
        self,
        run: Run,
        workflow: type[Workflow] | None,
        *,
        events: EventLog | None = None,
        claim_owner: str | None = None,
    ) -> None:
        super().__init__(events=events)
        self.run = run
        self._workflow = workflow
        self.claim_owner = claim_owner
        self.claimed: Held | None = None
        # Whether the write run_scope() was given matched its row.
        self.written = False
        self._advancer: Advancer | None = None

    @property
    def workflow(self) -> type[Workflow]:
        if self._workflow is None:
            raise DefinitionMissing(
                f"run {self.run.pk} of {self.run.workflow_name!r} "
                f"v{self.run.workflow_version}: its definition is not registered",
                run=str(self.run.pk),
            )
        return self._workflow

    @property
    def advancer(self) -> Advancer:
        """Graph evaluation for this run, created on first use."""
        if self._advancer is None:
            self._advancer = Advancer(self)
        return self._advancer

    def finish(self) -> None:
        """Settle the run's status if this transition evaluated its graph."""
        if self._advancer is not None:
            self._advancer.finish()

    def close(self) -> None:
        """Settle the run, write the events, hand ready work to the executor."""
        self.finish()
        super().close()


def _resolve(run: Run) -> type[Workflow] | None:
    """The run's definition; raises for an active run whose definition is gone.

    A run that is no longer active (unwinding or finished) needs no graph: it gets
    ``None`` when its definition is gone, and its compensations still run.
    """
    try:
        return registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing:
        if run.status in RUN_ACTIVE:
            raise
        return None


class run_scope:  # lower case: a context manager called like a function
    """Lock the run and open its scope; close it (settle, write, enqueue) on success.

    ``wait=False`` (scanners): a run held by another transaction raises
    :class:`~workflows.errors.RunBusy` instead of waiting. ``needs_definition=False``:
    verbs that must work even when the run's code is gone (cancel, park). ``workflow``:
    the caller already holds the definition (a worker's lease). ``write``: a
    compare-and-set of one of the run's rows made right after the lock, in the same
    statement on PostgreSQL (a worker's fenced completion,
    :func:`~workflows.engine.sql.locked_updates.lock_run_and_update`); whether it
    matched is the scope's :attr:`~RunScope.written`. It needs ``workflow``, so that
    nothing can fail between the write and the body.

    A class rather than a generator-based context manager: every transition on a run
    opens one, and a generator's frame and wrapper cost several calls more.
    """

    __slots__ = ("_opening", "_scope")

    def __init__(
        self,
        run_id: UUID,
        *,
        wait: bool = True,
        claim_owner: str | None = None,
        needs_definition: bool = True,
        workflow: type[Workflow] | None = None,
        write: RowWrite | None = None,
    ) -> None:
        self._opening = (run_id, wait, claim_owner, needs_definition, workflow, write)

    def __enter__(self) -> RunScope:
        run_id, wait, claim_owner, needs_definition, workflow, write = self._opening
        if write is None:
            run, written = lock_run(run_id, wait=wait), False
        else:
            assert wait and workflow is not None, "a write with the lock waits and has its workflow"
            run, written = lock_run_and_update(run_id, write)
        if workflow is None and needs_definition:
            try:
                workflow = _resolve(run)
            except DefinitionMissing as missing:
                events = EventLog()
                fail_run(run, missing.as_dict(), events)
                events.flush()
                raise AfterCommit(missing) from None
        scope = RunScope(run, workflow, claim_owner=claim_owner)
        scope.written = written
        self._scope = scope
        return scope

    def __exit__(self, error: type[BaseException] | None, *exc_info: object) -> None:
        if error is None:
            self._scope.close()


def nested_scope(run: UUID | Run, events: EventLog) -> RunScope | None:
    """A scope on another run inside the current transition, writing to ``events``.

    ``run``: its id, locked here, or the run itself when this transition has locked it
    already. For a child run reporting its end to its parent (a child is always locked
    before its parent), and for a queued run being started (locked without waiting). A
    run whose definition is gone is failed here and ``None`` is returned: the
    transition that opened the scope still commits.
    """
    locked = run if isinstance(run, Run) else lock_run(run)
    try:
        workflow = _resolve(locked)
    except DefinitionMissing as missing:
        fail_run(locked, missing.as_dict(), events)
        return None
    return RunScope(locked, workflow, events=events)


def held_scope(run: Run, workflow: type[Workflow], *, events: EventLog | None = None) -> RunScope:
    """A scope on a run this transition has just created, with its definition.

    No lock to take: no other transaction sees the run before this one commits. Its
    events go to ``events`` (the parent's, for a child run), or to a log of its own.
    The caller closes it once it has written its own state.
    """
    return RunScope(run, workflow, events=events)


@contextmanager
def unlocked_scope() -> Iterator[TransitionScope]:
    """The frame of a transition that does not lock one run first: collect its events
    and ready work, write and hand them on when the body succeeds.

    For a claim (it must not wait for the run: see the module's docstring), a fenced
    heartbeat or rejection, a redispatch, and the start of queued runs.
    """
    scope = TransitionScope()
    yield scope
    scope.close()


def run_of_step(step_id: int) -> UUID:
    """The run a step belongs to (never changes, so it is read before the lock)."""
    return Step.objects.values_list("run_id", flat=True).get(pk=step_id)


@transition
def fail_missing_definition(run_id: UUID, missing: DefinitionMissing) -> None:
    """Fail an active run whose definition is gone, in a transition of its own.

    For callers that found out without holding the run (a claim): locking the run
    there would reverse the lock order of every other transition.
    """
    with run_scope(run_id, needs_definition=False) as scope:
        fail_run(scope.run, missing.as_dict(), scope.events)
