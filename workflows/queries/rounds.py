"""Every round of a step: the ended ones (``StepRound`` rows, kept when a rerun, a retry
or a loop's next iteration started the step afresh) and the current one (the step row),
oldest first, each with the telemetry its attempts reported and its attempts numbered
within it (:func:`workflows.status.attempt_in_round`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import QuerySet

from workflows.models import Run, Step, StepRound
from workflows.queries.iterations import named_step
from workflows.queries.runs import get_run
from workflows.status import attempt_in_round

__all__ = ["Round", "as_round", "ended_rounds", "step_rounds"]


@dataclass(frozen=True)
class Round:
    """What one round of a step did: its attempts (numbered within it), its last
    progress, its summary and the ``seq`` range of its log frames (``frames_after``
    exclusive, ``frames_through`` inclusive: ``workflows.frames(step, round=n)``)."""

    round: int
    generation: int
    iteration: int
    status: str
    attempt: int
    max_attempts: int
    progress_done: float | None
    progress_total: float | None
    progress_message: str
    progress_at: datetime | None
    summary: Any
    summary_version: int
    frames_after: int
    frames_through: int
    frames_dropped: int
    started_at: datetime | None
    finished_at: datetime | None
    ended_at: datetime | None
    current: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def as_round(row: Step | StepRound) -> Round:
    """One round from the row that holds it: the step row holds the current one."""
    current = isinstance(row, Step)
    before = row.round_attempts_before if isinstance(row, Step) else row.attempts_before
    attempts = attempt_in_round(row.attempt, row.max_attempts, before)
    return Round(
        round=row.round,
        generation=row.generation,
        iteration=row.iteration,
        status=row.status,
        attempt=attempts.attempt,
        max_attempts=attempts.max_attempts,
        progress_done=row.progress_done,
        progress_total=row.progress_total,
        progress_message=row.progress_message,
        progress_at=row.progress_at,
        summary=row.summary,
        summary_version=row.summary_version,
        frames_after=row.round_frames_before if isinstance(row, Step) else row.frames_after,
        frames_through=row.frames_written if isinstance(row, Step) else row.frames_through,
        frames_dropped=row.frames_dropped,
        started_at=row.started_at,
        finished_at=row.finished_at,
        ended_at=None if isinstance(row, Step) else row.ended_at,
        current=current,
    )


def ended_rounds(step_ids: list[int]) -> QuerySet[StepRound]:
    """The ended rounds of these steps, oldest first."""
    return StepRound.objects.filter(step_id__in=step_ids).order_by("step_id", "round")


def step_rounds(run: Run | UUID | str, step: str) -> list[Round]:
    """Every round of the step of ``run`` named ``step``, oldest first, the current one
    last: :class:`~workflows.errors.RunNotFound` or :class:`~workflows.errors.StepNotFound`
    otherwise. Three queries (two given a run)."""
    found_run = run if isinstance(run, Run) else get_run(run)
    found = named_step(found_run, step)
    return [*(as_round(row) for row in ended_rounds([found.pk])), as_round(found)]
