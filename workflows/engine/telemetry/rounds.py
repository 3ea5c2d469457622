"""A step's rounds: a rerun, a retry and a loop's next iteration each start the steps
they reset afresh.

A round is what a step did since it was last started afresh: its attempts, the
progress and summary they reported, their log frames. The step row holds the current
round; when a verb or a loop resets the step, the ended round is copied into a
``StepRound`` row first (:func:`keep_rounds`, one ``INSERT ... SELECT`` for all the
steps reset together), then the reset writes :data:`NEW_ROUND` with its own changes:
no progress, an empty summary, no frames of the round yet, and the attempts made so
far counted as before the round. ``attempt`` itself counts on (it fences a late
worker's writes and numbers frames across the step's life); every surface shows the
attempt of the round, ``attempt - round_attempts_before``
(:func:`workflows.status.attempt_in_round`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workflows.engine.sql.expressions import SqlExpr
from workflows.engine.sql.iterations import archive_rounds

# The columns a new round sets, row by row: telemetry emptied, no start yet, the
# counters of attempts and frames made so far kept as the round's start.
NEW_ROUND: dict[str, Any] = {
    "progress_done": None,
    "progress_total": None,
    "progress_message": "",
    "progress_at": None,
    "summary": {},
    "summary_version": 0,
    "frames_dropped": 0,
    # Set again by the round's first claim (workflows.engine.claims.begin_attempt).
    "started_at": None,
    "round": SqlExpr('"round" + 1'),
    "round_attempts_before": SqlExpr('"attempt"'),
    "round_frames_before": SqlExpr('"frames_written"'),
}


def keep_rounds(step_ids: Sequence[int]) -> None:
    """Keep the round each of ``step_ids`` holds as an ended one, before the caller's
    reset writes :data:`NEW_ROUND` into the same rows (in the same transaction)."""
    archive_rounds(step_ids)
