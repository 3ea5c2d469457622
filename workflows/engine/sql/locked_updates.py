"""Locking the run and compare-and-setting one of its rows, in one statement on PostgreSQL.

Why: a worker's completion locks its run (:func:`~.locks.lock_run`), then writes its
fenced ``UPDATE``: two round trips, at about 0.3 ms of CPU each on PostgreSQL (client
and server, ``docs/benchmarks.md``). One statement does both::

    WITH r AS (SELECT <run columns> FROM workflows_run WHERE id = %s FOR NO KEY UPDATE),
         u AS (UPDATE <row> SET version = version + 1, …
               WHERE <fence> AND EXISTS (SELECT 1 FROM r) RETURNING 1)
    SELECT r.*, EXISTS (SELECT 1 FROM u) FROM r

The lock order is kept, run before row: the ``UPDATE`` locks its row only once a row
has passed its ``WHERE``, whose ``EXISTS`` reads ``r``, so the run is locked (waited
for, if another transition holds it) first. The fence is the ``WHERE`` of
:func:`~.updates.cas_update`, and after a wait for the run PostgreSQL re-checks it on
the row's newest version, so a row another transition moved meanwhile is not written.
The run comes back as :func:`~.locks.lock_run` returns it, also when the fence did not
match. SQLite (no data-modifying CTE, and ``BEGIN IMMEDIATE`` already serialises
writers) runs the two statements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db import models

from workflows.engine.sql.adapters import stored_run_id
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import fetch_one
from workflows.engine.sql.locks import lock_run, locked_run, locked_run_select
from workflows.engine.sql.updates import cas_update, update_sql
from workflows.models import Run


@dataclass(frozen=True)
class RowWrite:
    """A compare-and-set of one row: :func:`~.updates.cas_update`'s arguments."""

    model: type[models.Model]
    pk: Any
    version: int
    where: dict[str, Any] = field(default_factory=dict)
    changes: dict[str, Any] = field(default_factory=dict)

    def run(self) -> bool:
        """Write it alone; whether the expected row changed."""
        return cas_update(
            self.model, self.pk, version=self.version, where=self.where, **self.changes
        )


def lock_run_and_update(run_id: UUID, write: RowWrite) -> tuple[Run, bool]:
    """Lock the run (waiting for it), then compare-and-set ``write``'s row.

    Returns the run, read as :func:`~.locks.lock_run` reads it, and whether the row
    changed. Raises ``Run.DoesNotExist`` for an unknown run (nothing written then).
    """
    connection = engine_connection()
    if connection.vendor != "postgresql":
        run = lock_run(run_id)
        return run, write.run()
    conditions = {write.model._meta.pk.name: write.pk, "version": write.version, **write.where}
    update, update_params = update_sql(connection, write.model, conditions, write.changes)
    sql = (
        f"WITH r AS ({locked_run_select(connection)}), "
        f"u AS ({update} AND EXISTS (SELECT 1 FROM r) RETURNING 1) "
        "SELECT r.*, EXISTS (SELECT 1 FROM u) FROM r"
    )
    row = fetch_one(connection, sql, [stored_run_id(run_id, connection), *update_params])
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return locked_run(run_id, row, connection), bool(row[-1])
