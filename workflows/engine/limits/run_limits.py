"""Run-level concurrency: at most ``Workflow.max_concurrent_runs`` runs of a workflow
at once; the others wait ``queued`` and start in order as places free up.

A place is one slot of the key ``runs:<workflow name>`` (:mod:`workflows.engine.limits.slots`),
held by the run itself: it counts while the run is neither queued nor final, so it
frees itself when the run ends, whatever ended it, and a paused run keeps its place.

- **Admission** (:func:`admit`, from ``create_run``): a new top-level run takes a place
  in its own transition, or is created ``queued`` (its steps written, nothing entered)
  when none is free *or* queued runs of the workflow already wait: first come, first
  served.
- **Dequeue** (:func:`fill`): in the transition that ends a run holding a place
  (:func:`free_place`, a run-end hook), the place is released and the next queued run
  starts, highest ``priority`` first, oldest first: it takes the place, moves
  ``queued → running`` and its roots are entered, all in that same transition.
- **Backstop**: the ``start_queued_runs`` scanner runs :func:`start_queued` per
  workflow with queued runs, for places freed by paths that skip the hook (a run
  deleted, a limit raised or removed in a new deploy).
- **Revival** (:func:`take_place_again`): a retry or rerun of a finished run takes a
  free place in its own transition, or is refused with :class:`InvalidTransition`; it
  neither waits in the queue nor jumps it.

**Child runs do not count.** A run started by a ``SubWorkflow`` step or a fan-out is
part of its parent's run, which already holds a place under its own workflow's limit.
Counting children could deadlock: a parent holding a place waits for its child, which
waits for a place that only its parent's end would free (a workflow that starts itself,
or N parents each starting a child of a workflow limited to N).

**The limit is the latest registered version's**: all versions of a workflow share one
key, so a deploy that raises the limit applies to the runs already queued.

**Locks.** The dequeuer locks queued runs with ``SKIP LOCKED`` (``lock_run(wait=False)``)
and takes slots with ``SKIP LOCKED``, so it never waits for a lock: it may hold the
ending run (and, for a child's end, its parent) and then takes queued runs, and no
transition holding a queued run ever waits for another run. A queued run another
transaction holds at that instant (being cancelled, or its priority changed) is passed
over and starts at the next opportunity. A start that finds no free place locks the
key's slot rows (waiting) before it decides to queue: a transition ending a run
releases its slot row before it looks for queued runs, so of the two, one sees the
other's work and no place stays free while a run waits.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from workflows.definitions import Workflow, registry
from workflows.engine.events import EventLog
from workflows.engine.limits import slots
from workflows.engine.runs import record_entry, set_run_status, when_run_ends, when_run_revives
from workflows.engine.scope import nested_scope, unlocked_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.locks import lock_run
from workflows.engine.transaction import transition
from workflows.errors import DefinitionMissing, InvalidTransition, RunBusy
from workflows.models import ConcurrencySlot, Run
from workflows.status import RunStatus

# Names whose queue this thread is filling: a queued run that ends at once while being
# started frees its place to the loop already running, not to a nested one.
_filling = threading.local()


def slot_key(name: str) -> str:
    """The concurrency-slot key of the runs of workflow ``name``."""
    return f"runs:{name}"


def limit_of(name: str) -> int | None:
    """``max_concurrent_runs`` of the latest registered version of ``name`` (or ``None``)."""
    try:
        return registry.latest(name).max_concurrent_runs
    except DefinitionMissing:
        return None


def _holder(run_id: UUID) -> slots.Holder:
    return slots.Holder("run", run_id=run_id)


def _queued(name: str) -> Any:
    return Run.objects.filter(workflow_name=name, status=RunStatus.QUEUED)


def admit(definition: type[Workflow], run_id: UUID) -> bool:
    """Take a place for the new top-level run ``run_id`` (not inserted yet); ``False``
    when it must wait ``queued``.

    Inside the starting transition. Of two starts racing for the last place, one
    compare-and-set wins and the other run is queued. Queued runs waiting first keep
    their turn: the new run is queued behind them even if a place is free, and those
    older runs are started now if places are.
    """
    limit = limit_of(definition.name)
    if limit is None:
        return True
    key = slot_key(definition.name)
    if not _queued(definition.name).exists() and slots.acquire(key, limit, _holder(run_id)):
        return True
    # Wait for transitions that are freeing a place of this key, then look again.
    list(
        ConcurrencySlot.objects.select_for_update(no_key=True)
        .filter(key=key)
        .order_by("slot")
        .values_list("id", flat=True)
    )
    fill(definition.name)
    return not _queued(definition.name).exists() and slots.acquire(key, limit, _holder(run_id))


@dataclass
class Filled:
    """What one pass over a workflow's queue did: runs started, runs passed over
    because another transaction held them."""

    started: int = 0
    skipped: int = 0


def fill(name: str, events: EventLog | None = None, *, freed_by: UUID | None = None) -> Filled:
    """Start queued runs of ``name`` while places are free: highest priority first,
    oldest first. Inside the caller's transition; ``events`` is its event log (a log
    of its own, flushed here, when ``None``).
    """
    if events is None:
        with unlocked_scope() as scope:
            return fill(name, scope.events, freed_by=freed_by)
    filling: set[str] = _filling.__dict__.setdefault("names", set())
    if name in filling:
        return Filled()
    filled = Filled()
    limit = limit_of(name)
    passed: set[UUID] = set()
    filling.add(name)
    try:
        while True:
            head = (
                _queued(name)
                .exclude(pk__in=passed)
                .order_by("-priority", "created_at", "id")
                .values_list("id", flat=True)
                .first()
            )
            if head is None:
                break
            try:
                run = lock_run(head, wait=False)
            except (RunBusy, Run.DoesNotExist):
                passed.add(head)
                filled.skipped += 1
                continue
            if run.status != RunStatus.QUEUED:
                passed.add(head)  # started or cancelled since the read above
                continue
            if limit is not None and not slots.acquire(slot_key(name), limit, _holder(run.pk)):
                break
            _start(run, events, freed_by)
            filled.started += 1
    finally:
        filling.discard(name)
    return filled


def _start(run: Run, events: EventLog, freed_by: UUID | None) -> None:
    """``queued → running`` for a run holding its place, and enter its roots."""
    set_run_status(run, RunStatus.RUNNING, events, started_at=db_now())
    events.add(run.pk, "run.dequeued", freed_by=str(freed_by) if freed_by is not None else None)
    scope = nested_scope(run, events)
    if scope is None:  # its code was dropped while it waited: failed instead
        return
    record_entry(events, run, scope.workflow)
    scope.advancer.start()
    scope.close()


@when_run_ends
def free_place(run: Run, events: EventLog) -> None:
    """Release an ending run's place and start the next queued run in its transition."""
    if run.parent_run_id is not None or limit_of(run.workflow_name) is None:
        return
    if slots.release(_holder(run.pk)):
        fill(run.workflow_name, events, freed_by=run.pk)


@when_run_revives
def take_place_again(run: Run, events: EventLog) -> None:
    """A finished run brought back by a retry or rerun needs a free place, or the verb
    is refused (and rolled back). A flow member healed back to ``blocked`` takes its
    place when its join lets it start, as every blocked member does."""
    limit = limit_of(run.workflow_name)
    if run.parent_run_id is not None or limit is None or run.status == RunStatus.BLOCKED:
        return
    waiting = _queued(run.workflow_name).count()
    if not waiting and slots.acquire(slot_key(run.workflow_name), limit, _holder(run.pk)):
        return
    busy = slots.held(slot_key(run.workflow_name))
    raise InvalidTransition(
        f"run {run.pk}: {run.workflow_name!r} allows {limit} concurrent runs "
        f"({busy} active, {waiting} queued); it can run again once a place is free "
        "and no queued run waits",
        workflow=run.workflow_name,
        max_concurrent_runs=limit,
        active=busy,
        queued=waiting,
    )


@transition
def start_queued(name: str) -> Filled:
    """Start the queued runs of ``name`` that free places allow (the backstop scanner)."""
    return fill(name)
