"""``workflows_tail RUN [--follow]``: a run's events and its steps' log frames, printed
oldest first, and with ``--follow`` as they commit, until the run ends or Ctrl-C."""

from __future__ import annotations

import re
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections

import workflows
from tests.support.commands import run_command
from tests.support.live_rows import log, running_step
from tests.support.threads import THREAD_TIMEOUT_SECONDS
from workflows import Task, Workflow
from workflows.queries.run_tail import RunTail
from workflows.testing import run_pending

HERE = "tests.commands.test_tail"


def chatty(ctx):
    ctx.progress(1, 2, "half way")
    ctx.log("reading input")
    ctx.log("two lines\nof text")
    ctx.log("disk almost full", stream="stderr")
    return {"rows": 2}


class Chatty(Workflow):
    name = "tail_chatty"
    talk = Task(f"{HERE}.chatty")
    after_talk = Task(f"{HERE}.chatty")


def tail(*args: str) -> list[str]:
    return run_command("workflows_tail", *args).splitlines()


def kinds(lines: list[str]) -> list[str]:
    """Each line as what it is: the event type, or the step and stream of a frame."""
    parsed = []
    for line in lines:
        frame = re.match(r"\S+ \S+ (\S+) #\d+ (\w+)\| ", line)
        event = re.match(r"\S+ \S+ ([a-z_]+\.[a-z_]+)", line)
        parsed.append(f"{frame[1]}:{frame[2]}" if frame else event[1] if event else line)
    return parsed


@pytest.mark.django_db
def test_an_ended_run_prints_its_events_and_frames_then_says_it_ended():
    run = workflows.start_run(Chatty)
    run_pending()

    lines = tail(str(run.pk))

    assert lines[-1] == f"Run {run.pk} is completed: nothing more will come."
    printed = kinds(lines[:-1])
    assert printed.count("talk:stdout") == 2 and printed.count("talk:stderr") == 1
    assert printed.count("after_talk:stdout") == 2
    assert printed[0] == "run.started" and printed[-1] == "run.completed"
    assert printed.index("talk:stdout") < printed.index("after_talk:stdout")
    assert "    of text" in lines  # a frame's second line, indented under it
    assert any(re.search(r"step\.completed \[talk\] ", line) for line in lines)


@pytest.mark.django_db
def test_without_follow_a_running_run_prints_what_there_is_and_returns():
    step = running_step()
    log(step, "first", "second")

    lines = tail(str(step.run_id)[:8])

    assert kinds(lines)[-2:] == ["export:stdout", "export:stdout"]
    assert lines[-1].endswith("export #2 stdout| second")
    assert "nothing more will come" not in "\n".join(lines)


@pytest.mark.django_db
def test_a_long_log_comes_whole_across_reads(monkeypatch):
    monkeypatch.setattr("workflows.queries.run_tail.MAX_FRAMES_LIMIT", 3)
    step = running_step()
    log(step, *(f"line {n}" for n in range(10)))

    lines = tail(str(step.run_id))

    assert [line.rsplit("| ", 1)[1] for line in lines if "| " in line] == [
        f"line {n}" for n in range(10)
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("reference", ["not-a-run", "00000000-0000-0000-0000-000000000000"])
def test_a_bad_run_is_a_command_error_naming_it(reference):
    with pytest.raises(CommandError, match=re.escape(reference[:8])):
        tail(reference)


@pytest.mark.django_db
def test_ctrl_c_stops_it_quietly(monkeypatch):
    step = running_step()
    log(step, "working")

    def interrupted(self, timeout):
        raise KeyboardInterrupt

    monkeypatch.setattr(RunTail, "wait", interrupted)

    lines = tail(str(step.run_id), "--follow")  # returns: exit status 0, no traceback

    assert lines[-2].endswith("export #1 stdout| working") and lines[-1] == ""


def test_help_explains_follow_and_the_line_formats(capsys):
    with pytest.raises(SystemExit):
        call_command("workflows_tail", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "--follow" in text and "tail -f" in text and "Ctrl-C" in text


class SignalsFirstWrite(StringIO):
    """A stdout that says when the command first printed: it is then waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.printed = threading.Event()

    def write(self, text: str) -> int:
        self.printed.set()
        return super().write(text)


@pytest.mark.django_db(transaction=True)
def test_follow_prints_frames_and_events_as_they_commit_and_stops_at_the_end():
    """The run is started; the tail follows it. Once the tail has printed the start, a
    thread runs the steps (their frames and events commit then): the tail prints them
    and ends with the run. The test ending at all shows the tail was woken."""
    run = workflows.start_run(Chatty)
    out = SignalsFirstWrite()

    def drive() -> None:
        try:
            if out.printed.wait(THREAD_TIMEOUT_SECONDS):
                run_pending()
        finally:
            connections.close_all()

    driver = threading.Thread(target=drive)
    driver.start()
    try:
        call_command("workflows_tail", str(run.pk), "--follow", stdout=out)
    finally:
        driver.join(THREAD_TIMEOUT_SECONDS)

    lines = out.getvalue().splitlines()
    assert lines[-1] == f"Run {run.pk} is completed: nothing more will come."
    printed = kinds(lines[:-1])
    assert printed[0] == "run.started" and printed[-1] == "run.completed"
    assert printed.count("talk:stdout") == printed.count("after_talk:stdout") == 2
