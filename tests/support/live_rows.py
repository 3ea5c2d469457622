"""Rows of live telemetry written directly, as a running attempt would leave them: a
claimed step, its progress and summary, and its log frames (numbered on from
``Step.frames_written``). For tests of the pages that show them."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from workflows import Task, Workflow
from workflows.engine import claim_step
from workflows.models import Frame, Run, Step


class Export(Workflow):
    name = "console_live_export"
    export = Task(NOOP)


def running_step(worker: str = "worker-7") -> Step:
    """The export step of a new run, claimed by ``worker``: status running, attempt 1."""
    run: Run = workflows.start_run(Export, {"rows": 10})
    step = run.steps.get(name="export")
    claim_step(step.pk, worker)
    return Step.objects.get(pk=step.pk)


def report(step: Step, done: float | None, total: float | None = None, message: str = "") -> None:
    Step.objects.filter(pk=step.pk).update(
        progress_done=done,
        progress_total=total,
        progress_message=message,
        progress_at=timezone.now(),
    )


def log(step: Step, *texts: str, stream: str = "stdout", **fields: Any) -> list[Frame]:
    """Append ``texts`` as frames of the step's current attempt, numbered on."""
    step.refresh_from_db()
    first = step.frames_written + 1
    frames = Frame.objects.bulk_create(
        Frame(
            step=step,
            seq=first + index,
            attempt=step.attempt,
            stream=stream,
            text=text,
            at=timezone.now(),
        )
        for index, text in enumerate(texts)
    )
    Step.objects.filter(pk=step.pk).update(frames_written=first + len(texts) - 1, **fields)
    return frames
