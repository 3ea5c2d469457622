"""The archive of a loop's finished iterations: each step row copied into a
``StepIteration`` row, all of them in one ``INSERT ... SELECT``
(:mod:`workflows.engine.loops.iterations` says when)."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import execute
from workflows.engine.sql.identifiers import column, table
from workflows.models import Step, StepIteration

# The columns an iteration's archive copies from the step row, under the same names.
_ARCHIVED = (
    "run",
    "iteration",
    "generation",
    "status",
    "attempt",
    "output",
    "error",
    "failure_class",
    "decision",
    "decided_via",
    "decided_by",
    "decided_at",
    "feedback",
    "selections",
    "started_at",
    "finished_at",
)


def archive_iterations(step_ids: Sequence[int]) -> None:
    """Keep what each of ``step_ids`` holds as a finished iteration: one statement."""
    if not step_ids:
        return
    connection = engine_connection()
    into = ", ".join(column(StepIteration, name) for name in _ARCHIVED)
    source = ", ".join(column(Step, name) for name in _ARCHIVED)
    sql = (
        f"INSERT INTO {table(StepIteration)} ({into}, {column(StepIteration, 'step')}, "
        f"{column(StepIteration, 'archived_at')}) SELECT {source}, id, %s FROM {table(Step)} "
        f"WHERE id IN ({', '.join(['%s'] * len(step_ids))})"
    )
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    execute(connection, sql, [now, *step_ids])
