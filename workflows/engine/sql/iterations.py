"""The archive of a loop's finished iterations: each step row copied into a
``StepIteration`` row, all of them in one ``INSERT ... SELECT``
(:mod:`workflows.engine.loops.iterations` says when). And of every step's ended rounds
(:func:`archive_rounds`, :mod:`workflows.engine.telemetry.rounds` says when)."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import execute
from workflows.engine.sql.identifiers import column, table
from workflows.models import Step, StepIteration, StepRound

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
        f"{column(StepIteration, 'attempts_before')}, {column(StepIteration, 'archived_at')}) "
        f"SELECT {source}, id, {column(Step, 'round_attempts_before')}, %s FROM {table(Step)} "
        f"WHERE id IN ({', '.join(['%s'] * len(step_ids))})"
    )
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    execute(connection, sql, [now, *step_ids])


# The columns a round's archive copies, as (StepRound field, Step field).
_ROUND_COLUMNS = (
    ("run", "run"),
    ("round", "round"),
    ("generation", "generation"),
    ("iteration", "iteration"),
    ("status", "status"),
    ("attempts_before", "round_attempts_before"),
    ("attempt", "attempt"),
    ("max_attempts", "max_attempts"),
    ("progress_done", "progress_done"),
    ("progress_total", "progress_total"),
    ("progress_message", "progress_message"),
    ("progress_at", "progress_at"),
    ("summary", "summary"),
    ("summary_version", "summary_version"),
    ("frames_after", "round_frames_before"),
    ("frames_through", "frames_written"),
    ("frames_dropped", "frames_dropped"),
    ("started_at", "started_at"),
    ("finished_at", "finished_at"),
)


def archive_rounds(step_ids: Sequence[int]) -> None:
    """Keep the round each of ``step_ids`` holds as an ended round (a ``StepRound`` row,
    its telemetry and attempts): one statement, before the rows start their next round."""
    if not step_ids:
        return
    connection = engine_connection()
    into = ", ".join(column(StepRound, name) for name, _ in _ROUND_COLUMNS)
    source = ", ".join(column(Step, name) for _, name in _ROUND_COLUMNS)
    sql = (
        f"INSERT INTO {table(StepRound)} ({into}, {column(StepRound, 'step')}, "
        f"{column(StepRound, 'ended_at')}) SELECT {source}, id, %s FROM {table(Step)} "
        f"WHERE id IN ({', '.join(['%s'] * len(step_ids))})"
    )
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    execute(connection, sql, [now, *step_ids])
