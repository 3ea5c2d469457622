"""Live telemetry of a running task step's attempt: progress, log frames and a summary
document, written in fenced batches (:mod:`.flush`), bounded per attempt
(:mod:`.trimming`), the summary changed by JSON merge patches
(:mod:`workflows.merge_patch`)."""

from workflows.engine.telemetry.flush import flush_telemetry
from workflows.engine.telemetry.pending import PendingFrame, PendingTelemetry, Progress
from workflows.engine.telemetry.trimming import FrameBudget, Trim

__all__ = [
    "FrameBudget",
    "PendingFrame",
    "PendingTelemetry",
    "Progress",
    "Trim",
    "flush_telemetry",
]
