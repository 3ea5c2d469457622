"""Print a run's events and its steps' log frames; with ``--follow``, as they arrive."""

from __future__ import annotations

from typing import Any

from workflows.management.arguments import refusals_as_command_errors, run_from_options
from workflows.management.base import DeclaredCommand
from workflows.management.options import RUN_ARGUMENTS, argument
from workflows.management.output import cell, payload_summary
from workflows.models import Event
from workflows.queries.run_tail import RunTail, StepFrame

# Seconds one wait of --follow lasts before it reads again anyway: the long poll's own
# backstop reads more often; this only bounds how long one call blocks.
FOLLOW_WAIT = 30.0


def entry_line(entry: Event | StepFrame) -> str:
    """One entry as a line: ``<time> <step> #<seq> <stream>| <text>`` for a frame (a
    frame of several lines keeps them, indented), ``<time> <type> [<step>] <payload>``
    for an event."""
    if isinstance(entry, StepFrame):
        frame = entry.frame
        text = frame.text.replace("\n", "\n    ")
        return f"{cell(frame.at)} {entry.step} #{frame.seq} {frame.stream}| {text}"
    step_name = getattr(entry, "step_name", None)
    step = f" [{step_name}]" if step_name else ""
    payload = f" {payload_summary(entry.payload)}" if entry.payload else ""
    return f"{cell(entry.created_at)} {entry.type}{step}{payload}"


class Command(DeclaredCommand):
    help = (
        "Print run RUN's events (its history, in commit order) and the log frames its "
        "steps wrote (ctx.log), oldest first, one line each: events as '<time> <type> "
        "[<step>] <payload>', frames as '<time> <step> #<seq> <stream>| <text>'. With "
        "--follow, keep printing them as they arrive, as 'tail -f' does, until the run "
        "ends (the last line says how) or Ctrl-C stops it (exit status 0)."
    )

    arguments = (
        *RUN_ARGUMENTS,
        argument(
            "-f",
            "--follow",
            action="store_true",
            help="wait for new events and frames and print them as they commit, until the "
            "run is in a final status and everything of it was printed",
        ),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            tail = RunTail(run_from_options(options))
        try:
            self._print(tail, follow=options["follow"])
        except KeyboardInterrupt:
            self.stdout.write("")  # leave the shell's prompt on a line of its own

    def _print(self, tail: RunTail, *, follow: bool) -> None:
        batch = tail.read()
        while True:
            for entry in batch.entries():
                self.stdout.write(entry_line(entry))
            self.stdout.flush()
            if batch.ended:
                self.stdout.write(f"Run {tail.run_id} is {batch.status}: nothing more will come.")
                return
            if batch.events or batch.frames:
                batch = tail.read()  # a long history comes in several reads
            elif follow:
                batch = tail.wait(FOLLOW_WAIT)
            else:
                return
