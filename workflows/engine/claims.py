"""Claiming leased work: the one place a step, item or compensation becomes ``running``.

A claim is a compare-and-set ``ready → running`` that raises ``attempt`` and sets a
lease on the database clock. It does not lock the run: two workers claiming the same
unit race on the unit's row alone, and exactly one wins. A batched fan-out
(``FanOut(batch_size=N)``) claims up to N items of its step in one set-based
compare-and-set; each item gets the lease, attempt and event an unbatched claim gives it.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

from workflows.definitions import LeasedNode, Workflow, registry
from workflows.definitions.limits import Route
from workflows.engine.events import EventLog
from workflows.engine.lease import Held, Lease, LeaseBatch
from workflows.engine.limits.admission import Admitted, Hold, admit, hold, limited
from workflows.engine.routing import serves
from workflows.engine.scope import RunScope, fail_missing_definition, unlocked_scope
from workflows.engine.sql.claim_reads import ClaimRow
from workflows.engine.sql.expressions import (
    attempts_plus,
    db_now,
    db_now_plus,
    db_now_unless_set,
)
from workflows.engine.sql.logged_updates import RowEvent, cas_update_many_logged
from workflows.engine.sql.rows import STEP_ROW_FIELDS, StepRow
from workflows.engine.sql.updates import cas_update, take_items
from workflows.engine.transaction import transition
from workflows.engine.work_kinds import STEP, WorkKind
from workflows.errors import DefinitionMissing, StaleState, WorkHeld
from workflows.status import StepStatus


def begin_attempt(lease: Lease, row: StepRow | ClaimRow, events: EventLog) -> Lease | None:
    """Compare-and-set ``row`` to ``running`` for ``lease.owner``; return the new lease.

    ``lease`` carries who claims and what the worker needs; attempt, budget and version
    come from ``row``. ``attempt`` goes up by one and the lease expires after the node's
    timeout on the database clock; ``started_at`` is set by the first claim only (a retry
    or a reclaim keeps it: each attempt's start is its ``started`` event). Returns
    ``None`` when the row changed since it was read (another worker claimed it first):
    nothing is written then.
    """
    attempt = row.attempt + 1
    if not cas_update(
        lease.kind.model,
        row.pk,
        version=row.version,
        where={"status": row.status},
        status=StepStatus.RUNNING,
        attempt=attempt,
        lease_owner=lease.owner,
        lease_expires_at=db_now_plus(lease.node.effective_timeout),
        started_at=db_now_unless_set("started_at"),
        updated_at=db_now(),
        held_on="",
    ):
        return None
    row.status, row.version, row.attempt = StepStatus.RUNNING, row.version + 1, attempt
    return _started(lease, row, events)


def begin_batch(
    lease: Lease, *, from_status: str, limit: int, events: EventLog, first: int | None = None
) -> LeaseBatch | None:
    """Claim up to ``limit`` items of ``lease``'s step still in ``from_status`` for
    ``lease.owner``, in one set-based compare-and-set; return them as one batch.

    ``lease`` is a template: who claims and what the worker needs; each item's own id,
    key, attempt, budget and version come from its row. ``first``: the item a queue
    message named, taken first if it is still there. Races: an item another worker
    claimed or locked meanwhile is not taken (the ``UPDATE`` restates ``from_status``;
    on PostgreSQL locked rows are skipped), so two claimers get disjoint batches.
    Returns ``None`` when no item was taken: nothing is written then.
    """
    rows = take_items(
        lease.step_id,
        lease.step_name,
        from_status=from_status,
        limit=limit,
        first=first,
        skip_locked=from_status == StepStatus.READY,
        **_next_attempt_for(lease.owner, lease.node),
    )
    if not rows:
        return None
    return LeaseBatch(
        [
            _started(lease, row, events, unit_id=row.pk, item_key=row.key, item=row.item)
            for row in rows
        ]
    )


def _next_attempt_for(owner: str, node: LeasedNode) -> dict[str, Any]:
    """The changes of a set-based claim: each row's next attempt of ``node``, leased to
    ``owner``."""
    return {
        "status": StepStatus.RUNNING,
        "attempt": _NEXT_ATTEMPT,
        "lease_owner": owner,
        "lease_expires_at": db_now_plus(node.effective_timeout),
        "started_at": db_now_unless_set("started_at"),
        "updated_at": db_now(),
        "held_on": "",  # whatever held the unit before, it starts now
    }


# Each row's attempt in a set-based claim: one more than its last.
_NEXT_ATTEMPT = attempts_plus(1)


def _claimed(lease: Lease, row: StepRow | ClaimRow, **unit: Any) -> Lease:
    """The lease of the attempt ``row`` (already ``running``) began.

    ``unit``: the unit's own fields when ``lease`` is a batch's template.
    """
    return dataclasses.replace(
        lease,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        version=row.version,
        attempts_before=row.attempts_before,
        **unit,
    )


def _started(lease: Lease, row: StepRow | ClaimRow, events: EventLog, **unit: Any) -> Lease:
    """The lease of the attempt ``row`` (already ``running``) began, and its event."""
    claimed = _claimed(lease, row, **unit)
    events.add(
        claimed.run_id,
        f"{claimed.kind.name}.started",
        step_id=claimed.step_id,
        attempt=claimed.attempt_in_round,
        owner=claimed.owner,
        **({"item": claimed.item_key} if claimed.item_key else {}),
    )
    return claimed


def _lease_in_scope(
    scope: RunScope,
    kind: WorkKind,
    *,
    unit_id: int,
    step_id: int,
    step_name: str,
    generation: int,
    iteration: int,
    item_key: str = "",
    item: object = None,
    **claimed: Any,
) -> Lease:
    """What the chaining worker of ``scope`` needs for a unit of ``step_name``;
    ``claimed``: the attempt's own fields once its row is claimed (attempt, version…)."""
    assert scope.claim_owner is not None
    node = scope.workflow.nodes[step_name]
    assert isinstance(node, LeasedNode)
    return Lease(
        kind=kind,
        unit_id=unit_id,
        run_id=scope.run.pk,
        step_id=step_id,
        step_name=step_name,
        owner=scope.claim_owner,
        workflow=scope.workflow,
        run_input=scope.run.input,
        traceparent=scope.run.traceparent,
        handler_path=node.handler_path,
        item_key=item_key,
        item=item,
        generation=generation,
        iteration=iteration,
        **claimed,
    )


def _may_chain(scope: RunScope, step_name: str, *, admitting: bool = False) -> bool:
    """Whether the scope's worker chains and may take ``step_name``'s next unit now: it
    holds no other and serves the step's route; unless the caller ``admitting`` checks
    the step's limits itself, no limit may apply to it."""
    if scope.claim_owner is None or scope.claimed is not None:
        return False
    node = scope.workflow.nodes[step_name]
    assert isinstance(node, LeasedNode)
    if not serves(scope.claim_owner, scope.workflow.route_of(step_name)):
        return False
    return admitting or not limited(
        scope.workflow, node, runtime_budgets=scope.run.has_runtime_budgets
    )


def _admitted_in_scope(
    scope: RunScope, kind: WorkKind, row: StepRow, *, step_id: int, item: object
) -> Admitted | None:
    """The limits of a unit the chaining worker is about to claim, checked in the
    transition that released it as a claim would check them (:func:`admit`).

    ``None`` when a limit holds it: the caller makes it ``ready`` and sends it through
    the queue, whose claim records the hold. A slot taken here is part of this
    transition, like the claim itself.
    """
    node = scope.workflow.nodes[row.name]
    assert isinstance(node, LeasedNode)
    run = scope.run
    facts = ClaimRow(
        pk=row.pk,
        status=row.status,
        version=row.version,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        step_id=step_id,
        step_name=row.name,
        generation=row.generation,
        run_id=run.pk,
        run_status=run.status,
        run_input=run.input,
        workflow_name=run.workflow_name,
        workflow_version=run.workflow_version,
        queue="",
        requires="",
        held_on="",
        business_key=run.business_key,
        traceparent=run.traceparent,
        runtime_budgets=run.has_runtime_budgets,
        item=item,
    )
    admitted = admit(kind, facts, node, scope.workflow)
    return admitted if isinstance(admitted, Admitted) else None


def claim_in_scope(
    scope: RunScope,
    kind: WorkKind,
    row: StepRow,
    *,
    step_id: int,
    generation: int,
    iteration: int,
    item_key: str = "",
    item: object = None,
) -> bool:
    """Claim a unit this transition just released, for the worker that is chaining.

    ``row`` is the unit's row (a step's, or an item's named after its step). Returns
    ``False`` (and claims nothing) when the scope's worker does not chain, already
    holds the next unit, does not serve its route or a limit holds it: the caller then
    makes the unit ``ready`` instead. Limits are checked here as a claim checks them.
    """
    if not _may_chain(scope, row.name, admitting=True):
        return False
    admitted = _admitted_in_scope(scope, kind, row, step_id=step_id, item=item)
    if admitted is None:
        return False
    lease = _lease_in_scope(
        scope,
        kind,
        unit_id=row.pk,
        step_id=step_id,
        step_name=row.name,
        generation=generation,
        iteration=iteration,
        item_key=item_key,
        item=item,
    )
    lease = dataclasses.replace(lease, refusal=admitted.refusal)
    scope.claimed = begin_attempt(lease, row, scope.events)
    if scope.claimed is None:
        raise StaleState(f"{lease.label} of run {scope.run.pk} changed while claimed")
    return True


def claim_pending_in_scope(scope: RunScope, kind: WorkKind, step_name: str) -> bool:
    """Claim the pending step ``step_name`` for the chaining worker in one statement.

    For the step a chain continues with once its only upstream completed: the
    compare-and-set ``pending → running`` finds the row by (run, name, ``pending``) and
    returns what the lease needs, so the step is not read first. Pending steps move
    only under the run lock, which this transition holds. Returns ``False`` (and
    writes nothing) when the scope's worker does not chain, already holds work, or the
    step is not pending: the caller then evaluates the graph the general way.
    """
    if not _may_chain(scope, step_name):
        return False
    owner = scope.claim_owner
    assert owner is not None
    node = scope.workflow.nodes[step_name]
    assert isinstance(node, LeasedNode)
    started = RowEvent(
        scope.run.pk,
        f"{kind.name}.started",
        {"owner": owner},
        from_row=("attempt",),
        less=(("attempt", "round_attempts_before"),),
    )
    rows = scope.events.carried_by(
        lambda recorded: cas_update_many_logged(
            kind.model,
            recorded,
            each=started,
            where={"run": scope.run.pk, "name": step_name, "status": StepStatus.PENDING},
            returning=STEP_ROW_FIELDS,
            **_next_attempt_for(owner, node),
        )
    )
    if not rows:
        return False
    row = StepRow(*rows[0])
    scope.claimed = _lease_in_scope(
        scope,
        kind,
        unit_id=row.pk,
        step_id=row.pk,
        step_name=step_name,
        generation=row.generation,
        iteration=row.iteration,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        version=row.version,
        attempts_before=row.attempts_before,
    )
    return True


def claim_batch_in_scope(
    scope: RunScope,
    kind: WorkKind,
    *,
    step_id: int,
    step_name: str,
    generation: int,
    iteration: int,
    limit: int,
) -> int:
    """Claim up to ``limit`` pending units of a step as one batch for the chaining worker.

    For a batched fan-out releasing items in the transition that recorded the worker's
    previous batch. Pending items move only under the run lock, which this transition
    holds, so none is lost to a race. Returns how many were claimed: 0 when the scope's
    worker does not chain or already holds work; the caller makes the rest ``ready``.
    """
    if not _may_chain(scope, step_name):
        return 0
    lease = _lease_in_scope(
        scope,
        kind,
        unit_id=0,
        step_id=step_id,
        step_name=step_name,
        generation=generation,
        iteration=iteration,
    )
    batch = begin_batch(lease, from_status=StepStatus.PENDING, limit=limit, events=scope.events)
    scope.claimed = batch
    return len(batch.leases) if batch is not None else 0


def claim(kind: WorkKind, unit_id: int, owner: str) -> Held:
    """Claim a ``ready`` unit of ``kind`` for ``owner``: ``ready → running``, attempt + 1.

    Of two workers claiming the same unit exactly one wins; the other gets
    :class:`StaleState` and must not run the handler. For a batched fan-out the unit
    comes with up to ``batch_size - 1`` more ready items of its step, claimed in the
    same statement, as a :class:`LeaseBatch`. The unit claimed may be another ready
    unit of the same route with a higher priority (:func:`~workflows.engine.sql.
    claim_reads.claim_step_row`). A limit that does not let it start yet (``engine.admission``)
    holds it, commits why, and raises :class:`WorkHeld`. A run whose workflow is not
    registered here fails with ``definition_missing`` (in a transition of its own,
    which keeps the lock order) and :class:`DefinitionMissing` is raised.
    """
    try:
        held = _claim(kind, unit_id, owner)
    except DefinitionMissing as missing:
        run_id = missing.details.get("run")
        if run_id is not None:
            fail_missing_definition(UUID(run_id), missing)
        raise
    if isinstance(held, Hold):
        raise WorkHeld(f"{kind.name} {unit_id} not started: held on {held.held_on}", unit=unit_id)
    return held


def claimable(kind: WorkKind, unit_id: int) -> bool:
    """Whether a :func:`claim` for ``unit_id`` would find ready work now: the unit, or
    (for steps and items) another ready unit of its route that the claim takes instead.

    A plain read outside any transaction: it takes no lock, and on SQLite it does not
    wait for the write lock. A worker looks first so that a nudge whose unit another
    worker already ran (it pulled it, :func:`workflows.workers.runner.execute`) costs one read,
    not a write transaction. The answer may be stale by the time the claim runs; the
    claim decides.
    """
    row = kind.read_claim(unit_id, locked=False)
    return row is not None and row.status == StepStatus.READY


def claim_step(step_id: int, owner: str) -> Lease:
    """:func:`claim` for a task step (never batched)."""
    lease = claim(STEP, step_id, owner)
    assert isinstance(lease, Lease)
    return lease


@transition
def _claim(kind: WorkKind, unit_id: int, owner: str) -> Held | Hold:
    row = kind.read_claim(unit_id)
    if row is None or row.status != StepStatus.READY:
        row = kind.read_claim(unit_id, preferred=False) if row is None else row
        status = row.status if row is not None else "missing or being claimed"
        raise StaleState(f"{kind.name} {unit_id} is {status}, not ready", unit=unit_id)
    if row.run_status not in kind.runs_while:  # paused: the unit waits for the resume
        raise StaleState(
            f"{kind.name} {row.pk} not claimed: its run is {row.run_status}", unit=row.pk
        )
    workflow = _workflow_of(row)
    node = workflow.nodes.get(row.step_name)
    if not isinstance(node, LeasedNode):
        raise StaleState(f"step {row.step_name!r} is not leased work of {workflow.label()}")
    route = Route.of_row(row.queue, row.requires)
    if not serves(owner, route):
        raise StaleState(f"{kind.name} {row.pk} is routed to {route}, not served here")
    with unlocked_scope() as scope:  # the unit, read SKIP LOCKED; its run is not locked
        admitted = admit(kind, row, node, workflow)
        if isinstance(admitted, Hold):
            record_hold(kind, row, admitted, scope.events)
            return admitted
        template = lease_of(kind, row, owner, workflow, node, admitted.refusal)
        size = kind.batch_size_of(node)
        held: Held | None = (
            begin_batch(
                template,
                from_status=StepStatus.READY,
                limit=size,
                events=scope.events,
                first=row.pk,
            )
            if size > 1
            else begin_attempt(template, row, scope.events)
        )
        if held is None:
            raise StaleState(
                f"{kind.label(row.step_name, row.item_key)} was claimed by another worker"
            )
        return held


def record_hold(kind: WorkKind, row: ClaimRow, held: Hold, events: EventLog) -> None:
    """Record that a limit holds ``row`` (its ``held_on``, and an event when the hold is
    new), as a claim that admitted it finds."""
    if row.held_on != held.held_on:
        events.add(row.run_id, f"{kind.name}.held", step_id=row.step_id, on=held.held_on)
    hold(kind, row, held)


def lease_of(
    kind: WorkKind,
    row: ClaimRow,
    owner: str,
    workflow: type[Workflow],
    node: LeasedNode,
    refusal: Exception | None,
) -> Lease:
    """What the claim of ``row`` hands its worker, before the attempt begins: a
    compensation's handler, output and round are those of the work it undoes (its
    record's payload)."""
    payload = row.payload or {}
    return Lease(
        kind=kind,
        unit_id=row.pk,
        run_id=row.run_id,
        step_id=row.step_id,
        step_name=row.step_name,
        owner=owner,
        workflow=workflow,
        run_input=row.run_input,
        traceparent=row.traceparent,
        handler_path=row.handler or node.handler_path,
        item_key=row.item_key,
        item=row.item,
        compensated_output=payload.get("output"),
        generation=payload.get("generation", row.generation),
        iteration=payload.get("iteration", row.iteration),
        refusal=refusal,
    )


def _workflow_of(row: ClaimRow) -> type[Workflow]:
    try:
        return registry.get(row.workflow_name, row.workflow_version)
    except DefinitionMissing as missing:
        missing.details["run"] = str(row.run_id)
        raise
