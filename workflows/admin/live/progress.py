"""The run page's "Running now" region: each running step's progress bar, message and
last log lines, as they stood when the region was rendered.

The page is whole without JavaScript. ``workflows/live_page.js`` renders the region
again whenever the run moves (:mod:`.pages`; a step's progress moves it), which needs
no API; where the project mounts the API, ``workflows/live.js`` also keeps each block
current between two renderings by polling it (the step, and its frames after the last
``seq`` shown), using the addresses this module puts on each block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import quote

from django.urls import NoReverseMatch, reverse

from workflows.admin.runs import pretty
from workflows.definitions import FanOut
from workflows.models import Step
from workflows.queries.frames import LogFrame
from workflows.queries.log_tails import TAIL_LINES, log_tails
from workflows.status import StepStatus

__all__ = ["LIVE_LIMIT", "LiveStep", "live_steps", "percent_done", "progress_text"]

# Running steps shown with a live block: a run with more running task steps at once is
# a fan-in of many branches, whose steps table and Log pages still show every one.
LIVE_LIMIT = 20


def percent_done(done: float | None, total: float | None) -> float | None:
    """How far along, 0 to 100, when both numbers are known and ``total`` is positive;
    ``None`` otherwise (the bar is then indeterminate)."""
    if done is None or not total or total <= 0:
        return None
    return round(min(max(done / total * 100, 0.0), 100.0), 1)


def _number(value: float) -> str:
    """``3``, ``2.5``, ``1000000``: at most three decimals, none when whole (as live.js)."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def progress_text(done: float | None, total: float | None) -> str:
    """``3 of 10 (30%)``, ``3 done`` without a total, or that none was reported yet."""
    if done is None:
        return "no progress reported yet"
    percent = percent_done(done, total)
    if percent is None:
        return f"{_number(done)} done"
    return f"{_number(done)} of {_number(total or 0)} ({_number(percent)}%)"


@dataclass(frozen=True)
class LiveStep:
    """A running step's block: its progress, its summary document (as indented JSON,
    ``""`` while it has none), its last log lines and where the script reads the next
    ones (``None`` when the project serves no API); ``stopping``: what its run says
    about it once it asked it to stop (``""`` until then)."""

    step: Step
    percent: float | None
    progress: str
    summary: str
    tail: list[LogFrame]
    log_url: str | None
    step_api_url: str | None
    frames_api_url: str | None
    stopping: str = ""

    @property
    def lines(self) -> int:
        """How many log lines the block keeps as new ones arrive."""
        return TAIL_LINES

    @property
    def after(self) -> int:
        """The frame cursor the script continues from: the last line shown."""
        return self.tail[-1].seq if self.tail else self.step.frames_written


def _api_url(name: str, *args: object) -> str | None:
    try:
        return reverse(f"workflows_api:{name}", args=args)
    except NoReverseMatch:
        return None


def _frames_api_url(step: Step) -> str | None:
    """``/api/runs/<run>/steps/<step name>/frames/``, under the run's own API address."""
    run_url = _api_url("run-detail", step.run_id)
    return f"{run_url}steps/{quote(step.name, safe='')}/frames/" if run_url else None


def live_steps(
    steps: list[Step],
    log_url: Callable[[Step], str | None],
    stopping: Mapping[str, str],
) -> list[LiveStep]:
    """A block for each running step (at most :data:`LIVE_LIMIT`), in the order given;
    one query reads the log tails of them all. A fan-out's items run, not the fan-out
    itself: the page's fan-out table shows its progress. ``stopping``: by step name,
    what the run says about a step it asked to stop."""
    running = [
        step for step in steps if step.status == StepStatus.RUNNING and step.kind != FanOut.kind
    ][:LIVE_LIMIT]
    tails = log_tails(running, TAIL_LINES)
    return [
        LiveStep(
            step=step,
            percent=percent_done(step.progress_done, step.progress_total),
            progress=progress_text(step.progress_done, step.progress_total),
            summary=pretty(step.summary) if step.summary else "",
            tail=tails[step.pk],
            log_url=log_url(step),
            step_api_url=_api_url("step-detail", step.pk),
            frames_api_url=_frames_api_url(step),
            stopping=stopping.get(step.name, ""),
        )
        for step in running
    ]
