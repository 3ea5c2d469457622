"""Reading the rows of steps and fan-out items that graph evaluation works on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from workflows.engine.sql.adapters import from_db_json, stored_run_id
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import fetch_all, fetch_one
from workflows.engine.sql.identifiers import column, table
from workflows.models import FanOutItem, Step
from workflows.status import StepStatus


@dataclass
class StepRow:
    """The columns of a step that graph evaluation reads and compare-and-sets."""

    pk: int
    name: str
    status: str
    version: int
    attempt: int
    max_attempts: int
    generation: int = 0
    iteration: int = 1
    # The attempts made before the step's round (``Step.round_attempts_before``): the
    # events number the attempt within the round, as every surface does.
    attempts_before: int = 0


# The columns of a StepRow, in order: for hand-written SELECTs and ORM values_list().
STEP_ROW_FIELDS = (
    "id",
    "name",
    "status",
    "version",
    "attempt",
    "max_attempts",
    "generation",
    "iteration",
    "round_attempts_before",
)
_STEP_ROW_COLUMNS = ", ".join(column(Step, name) for name in STEP_ROW_FIELDS)


def step_rows(run_id: UUID, names: Iterable[str]) -> list[StepRow]:
    """Return the named steps of a run."""
    names = list(names)
    placeholders = ", ".join(["%s"] * len(names))
    sql = (
        f"SELECT {_STEP_ROW_COLUMNS} FROM {table(Step)} "
        f"WHERE {column(Step, 'run_id')} = %s AND {column(Step, 'name')} IN ({placeholders})"
    )
    connection = engine_connection()
    run_key = stored_run_id(run_id, connection)
    return [StepRow(*row) for row in fetch_all(connection, sql, [run_key, *names])]


def step_row(step_id: int) -> StepRow:
    """Read one step's row (raises ``Step.DoesNotExist``)."""
    sql = f"SELECT {_STEP_ROW_COLUMNS} FROM {table(Step)} WHERE id = %s"
    row = fetch_one(engine_connection(), sql, [step_id])
    if row is None:
        raise Step.DoesNotExist(f"step {step_id} does not exist")
    return StepRow(*row)


def step_statuses(run_id: UUID) -> set[str]:
    """The statuses the run's steps are in (each once): what settles the run's own."""
    connection = engine_connection()
    sql = (
        f"SELECT DISTINCT {column(Step, 'status')} FROM {table(Step)} "
        f"WHERE {column(Step, 'run_id')} = %s"
    )
    run_key = stored_run_id(run_id, connection)
    return {status for (status,) in fetch_all(connection, sql, [run_key])}


def completed_outputs(run_id: UUID, names: Sequence[str]) -> dict[str, Any]:
    """The outputs of the run's completed steps among ``names``, by step name."""
    connection = engine_connection()
    sql = (
        f"SELECT {column(Step, 'name')}, {column(Step, 'output')} FROM {table(Step)} "
        f"WHERE {column(Step, 'run_id')} = %s AND {column(Step, 'status')} = %s "
        f"AND {column(Step, 'name')} IN ({', '.join(['%s'] * len(names))})"
    )
    run_key = stored_run_id(run_id, connection)
    params = [run_key, StepStatus.COMPLETED, *names]
    rows = fetch_all(connection, sql, params) if names else []
    return {name: from_db_json(Step, "output", output, connection) for name, output in rows}


@dataclass
class ItemRow(StepRow):
    """A fan-out item's row, as claimed and compensated."""

    key: str = ""
    item: Any = None


# The columns :func:`item_row` reads, in order.
ITEM_ROW_COLUMNS = ", ".join(
    column(FanOutItem, name)
    for name in ("id", "step_id", "status", "version", "attempt", "max_attempts", "key", "item")
)


def item_row(row: Sequence[Any], step_name: str, connection: Any) -> ItemRow:
    """An :class:`ItemRow` from the :data:`ITEM_ROW_COLUMNS` of a fan-out item of
    ``step_name``."""
    pk, _, status, version, attempt, max_attempts, key, item = row
    item = from_db_json(FanOutItem, "item", item, connection)
    return ItemRow(pk, step_name, status, version, attempt, max_attempts, key=key, item=item)


def next_pending_items(step_id: int, step_name: str, limit: int) -> list[ItemRow]:
    """The first ``limit`` pending items of a fan-out step, in item order."""
    sql = (
        f"SELECT {ITEM_ROW_COLUMNS} FROM {table(FanOutItem)} "
        f"WHERE step_id = %s AND status = %s ORDER BY {column(FanOutItem, 'index')} LIMIT %s"
    )
    connection = engine_connection()
    rows = fetch_all(connection, sql, [step_id, StepStatus.PENDING, limit])
    return [item_row(row, step_name, connection) for row in rows]
