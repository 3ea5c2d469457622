"""The reads a claim starts with: the unit of leased work, its step and its run.

One shape (:class:`ClaimRow`) for steps, items and compensations; the table of leased
work (:mod:`workflows.engine.work_kinds`) names each kind's read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from workflows.engine.sql.adapters import from_db_json
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import fetch_one
from workflows.engine.sql.identifiers import column, status_literal, table
from workflows.engine.sql.locks import row_lock
from workflows.engine.sql.runtime_budgets import runtime_budgets
from workflows.models import CompensationRecord, FanOutItem, Run, Step
from workflows.status import RUN_ACTIVE, StepStatus


@dataclass
class ClaimRow:
    """A unit of leased work about to be claimed, with what its worker needs.

    One shape for steps, items and compensations: ``pk`` is the unit's own row; for a
    compensation ``item_key`` names the item it undoes (if any) and ``payload`` holds
    what it undoes. ``queue``, ``requires`` and ``held_on`` are the unit's routing and
    hold columns; ``business_key`` its run's (budgets count per business key).
    """

    pk: int
    status: str
    version: int
    attempt: int
    max_attempts: int
    step_id: int
    step_name: str
    generation: int
    run_id: UUID
    run_status: str
    run_input: dict[str, Any]
    workflow_name: str
    workflow_version: int
    queue: str
    requires: str
    held_on: str
    business_key: str
    # The run's W3C traceparent: the attempt's span is a child of it (workflows.tracing).
    traceparent: str
    # Whether an operator set a budget on the run's workflow (``RuntimeBudget``): read in
    # the same statement, so a workflow without budgets pays no query for them.
    runtime_budgets: bool
    iteration: int = 1
    # The attempts a step made before its round (0 for items and compensations, which
    # have no rounds): the events number the attempt within the round.
    attempts_before: int = 0
    item_key: str = ""
    item: Any = None
    handler: str = ""
    payload: Any = None


_CLAIM_COMMON = 21


def _claim_columns(step: Literal["u", "s"]) -> str:
    return (
        f"u.id, u.status, u.version, u.attempt, u.max_attempts, {step}.id, {step}.name, "
        f"{step}.generation, r.id, r.status, r.input, r.workflow_name, r.workflow_version, "
        f"u.queue, u.requires, u.held_on, r.business_key, r.traceparent, {runtime_budgets('r')}, "
        f"{step}.iteration, " + ("u.round_attempts_before" if step == "u" else "0")
    )


def _read_claim(
    sql: str, params: Sequence[Any], *, locked: bool = True
) -> tuple[ClaimRow, Sequence[Any]] | None:
    """Run one claim read: the common columns as a :class:`ClaimRow`, and the rest.

    The unit's row is locked ``SKIP LOCKED`` on PostgreSQL, so a worker that receives a
    duplicate nudge for a unit another worker is claiming right now moves on instead of
    queueing behind it. ``None``: missing, or being claimed. Not ``locked``: a plain
    read, for a worker looking before it claims (:func:`~workflows.engine.claims.
    claimable`), outside any transaction.
    """
    connection = engine_connection()
    lock = row_lock(connection, skip_locked=True, of="u") if locked else ""
    row = fetch_one(connection, f"{sql}{lock}", list(params))
    if row is None:
        return None
    claim = ClaimRow(*row[:_CLAIM_COMMON])
    claim.runtime_budgets = bool(claim.runtime_budgets)
    claim.run_id = Run._meta.pk.to_python(claim.run_id)
    claim.run_input = from_db_json(Run, "input", claim.run_input, connection)
    return claim, row[_CLAIM_COMMON:]


def _preferred(unit_table: str, named_id: int) -> tuple[str, list[Any]]:
    """The ``FROM``-less tail of a claim read that takes the named unit, or a ready unit
    of the same route with a higher priority whose run may start it.

    Queue messages are nudges in the order work became ready; priority is applied here,
    when a worker takes one: it claims the highest-priority ready unit of the route
    (the named unit's when none outranks it; oldest first among higher ones). Units
    held by a limit (``held_on``) are left to the nudge that releases them. No nudge is
    wasted: when another unit is taken instead of the named one, that unit's own nudge
    is still queued, and when it arrives and finds its unit already taken, it takes the
    best ready unit of the route instead (any priority) — the named unit, or better.
    """
    active = sorted(RUN_ACTIVE)
    # 'ready' as a literal: the partial index of ready work (workflows_step_ready_route)
    # serves only a query that states its condition as that constant.
    ready = status_literal(StepStatus.READY)
    return (
        f"JOIN {unit_table} n ON n.id = %s WHERE u.status = {ready} "
        "AND u.queue = n.queue AND u.requires = n.requires AND (u.id = n.id OR "
        f"(u.held_on = '' AND r.status IN ({', '.join(['%s'] * len(active))}) "
        f"AND (u.priority > n.priority OR n.status <> {ready}))) "
        "ORDER BY u.priority DESC, u.updated_at, u.id LIMIT 1",
        [named_id, *active],
    )


def claim_step_row(step_id: int, *, preferred: bool = True, locked: bool = True) -> ClaimRow | None:
    """Read a step and its run for claiming; with ``preferred``, a ready step of the
    same route with a higher priority instead, if there is one (:func:`_preferred`).
    ``locked``: as :func:`_read_claim`'s."""
    step, run = table(Step), table(Run)
    head = f"SELECT {_claim_columns('u')} FROM {step} u JOIN {run} r ON r.id = u.run_id "
    found = _read_claim(*_step_tail(step, step_id, preferred, head), locked=locked)
    return found[0] if found is not None else None


def _step_tail(unit_table: str, unit_id: int, preferred: bool, head: str) -> tuple[str, list[Any]]:
    if not preferred:
        return f"{head}WHERE u.id = %s", [unit_id]
    tail, params = _preferred(unit_table, unit_id)
    return f"{head}{tail}", params


def claim_item_row(item_id: int, *, preferred: bool = True, locked: bool = True) -> ClaimRow | None:
    """Read a fan-out item, its step and run for claiming (``preferred``, ``locked``: as
    for steps)."""
    item = table(FanOutItem)
    step, run = table(Step), table(Run)
    head = (
        f"SELECT {_claim_columns('s')}, u.{column(FanOutItem, 'key')}, u.item FROM {item} u "
        f"JOIN {step} s ON s.id = u.step_id JOIN {run} r ON r.id = s.run_id "
    )
    found = _read_claim(*_step_tail(item, item_id, preferred, head), locked=locked)
    if found is None:
        return None
    claim, (key, value) = found
    claim.item_key, claim.item = key, from_db_json(FanOutItem, "item", value, engine_connection())
    return claim


def claim_compensation_row(
    record_id: int, *, preferred: bool = False, locked: bool = True
) -> ClaimRow | None:
    """Read a compensation record, its step, run and item for claiming.

    Never another record: a run's compensations run one at a time in reverse order.
    ``locked``: as for steps.
    """
    record = table(CompensationRecord)
    item = table(FanOutItem)
    step, run = table(Step), table(Run)
    key = column(FanOutItem, "key")
    found = _read_claim(
        f"SELECT {_claim_columns('s')}, i.{key}, u.payload, u.handler FROM {record} u "
        f"JOIN {step} s ON s.id = u.step_id JOIN {run} r ON r.id = u.run_id "
        f"LEFT JOIN {item} i ON i.id = u.item_id WHERE u.id = %s",
        [record_id],
        locked=locked,
    )
    if found is None:
        return None
    claim, (key, payload, handler) = found
    claim.payload = from_db_json(CompensationRecord, "payload", payload, engine_connection()) or {}
    # The item row of an earlier loop iteration is gone: its key is in the payload.
    claim.item_key = key or claim.payload.get("item_key", "")
    claim.item, claim.handler = claim.payload.get("item"), handler
    return claim
