"""Operator commands end to end: output for people, --json for scripts, errors that name the
problem and exit non-zero."""

from __future__ import annotations

import json
import re
import sys
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

import workflows
from tests.support.commands import run_command, run_json
from tests.support.loop_review import review_in_round
from tests.support.runs import run_inline
from workflows import InvalidInput, PermanentError, Retry, Sleep, Task, Workflow
from workflows.models import Event, Run, Step
from workflows.queries import describe_run

pytestmark = pytest.mark.django_db

HERE = "tests.commands.test_commands"


def echo(ctx):
    return {"n": ctx.input.get("n", 0)}


def decline(ctx):
    raise PermanentError("card declined")


def replaceable(ctx):
    """A handler the check test swaps out, as a deploy that moved it would."""
    return None


class Simple(Workflow):
    name = "commands_simple"
    first = Task(f"{HERE}.echo")
    second = Task(f"{HERE}.echo")

    @classmethod
    def clean_input(cls, data):
        if data.get("n", 0) < 0:
            raise InvalidInput("commands_simple needs n >= 0")
        return data


class Declined(Workflow):
    name = "commands_declined"
    charge = Task(f"{HERE}.decline", retry=Retry(max_attempts=1))


class BranchingV1(Workflow):
    name = "commands_branching"
    start = Task(f"{HERE}.echo")
    wrap = Task(f"{HERE}.echo", when=lambda ctx: ctx.input.get("gift", False))
    nap = Sleep(timedelta(hours=1), after=["start"])
    end = Task(f"{HERE}.echo", after=["wrap", "nap"])


class BranchingV2(Workflow):
    name = "commands_branching"
    version = 2
    start = Task(f"{HERE}.echo")
    end = Task(f"{HERE}.echo")


class Movable(Workflow):
    name = "commands_movable"
    only = Task(f"{HERE}.replaceable")


def finished_run(workflow: str, data: dict[str, Any] | None = None, **keys: Any) -> Run:
    return run_inline(workflow, data or {}, **keys)


# workflows_start


def test_start_prints_the_new_run_and_its_status():
    output = run_command(
        "workflows_start", "commands_simple", "--input", '{"n": 2}', "--business-key", "B-1"
    )
    run = Run.objects.get()
    assert output == f"run {run.pk} of commands_simple v1: running\n"
    assert run.input == {"n": 2}
    assert run.business_key == "B-1"


def test_start_json_returns_the_run_summary():
    data = run_json("workflows_start", "commands_simple", "--input", "{}")
    run = Run.objects.get()
    assert data["id"] == str(run.pk)
    assert (data["workflow"], data["version"], data["status"]) == ("commands_simple", 1, "running")
    assert data["business_key"] == ""


def test_start_with_an_idempotency_key_returns_the_first_run_or_names_the_conflict():
    args = ["commands_simple", "--idempotency-key", "K-1", "--input"]
    first = run_json("workflows_start", *args, '{"n": 1}')
    again = run_json("workflows_start", *args, '{"n": 1}')
    assert again["id"] == first["id"]
    with pytest.raises(CommandError, match="idempotency key 'K-1' was used"):
        run_command("workflows_start", *args, '{"n": 2}')
    assert Run.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["commands_simple", "--input", "{n: 1}"], "--input is not valid JSON"),
        (["commands_simple", "--input", "[1]"], "must be a JSON object, got list"),
        (["commands_simple", "--input", '{"n": -1}'], "commands_simple needs n >= 0"),
        (["commands_nope", "--input", "{}"], "no workflow named 'commands_nope'"),
        (["commands_simple"], "the following arguments are required: --input"),
        (["commands_simple", "--input", "{}", "--variables", "{a"], "--variables is not valid"),
        (["commands_simple", "--input", "{}", "--variables", "[1]"], "variables must be a JSON"),
    ],
)
def test_start_refuses_bad_input_and_writes_nothing(args, message):
    with pytest.raises(CommandError, match=message):
        run_command("workflows_start", *args)
    assert not Run.objects.exists()


def test_start_with_variables_gives_the_run_its_first_variables_and_show_shows_them():
    run_command("workflows_start", "commands_simple", "--input", "{}", "--variables", '{"a": 1}')
    run = Run.objects.get()
    assert run.variables == {"a": 1}
    assert run_json("workflows_show", str(run.pk))["variables"] == {"a": 1}
    assert "variables" in run_command("workflows_show", str(run.pk))


# workflows_status


def test_status_lists_runs_newest_first_with_filters():
    first = finished_run("commands_simple", business_key="B-1")
    declined = finished_run("commands_declined")
    newest = workflows.start_run("commands_simple", {})
    assert [row["id"] for row in run_json("workflows_status")] == [
        str(newest.pk),
        str(declined.pk),
        str(first.pk),
    ]
    only_simple = run_json("workflows_status", "--workflow", "commands_simple")
    assert [row["id"] for row in only_simple] == [str(newest.pk), str(first.pk)]
    [failed] = run_json("workflows_status", "--status", "failed")
    assert failed["id"] == str(declined.pk)
    assert set(failed) == {
        "id",
        "workflow",
        "version",
        "status",
        "business_key",
        "title",
        "trigger",
        "tags",
        "dismissed_at",
        "created_at",
        "updated_at",
    }
    assert [row["id"] for row in run_json("workflows_status", "--limit", "1")] == [str(newest.pk)]


def test_status_prints_a_table():
    run = finished_run("commands_simple", business_key="B-7")
    header, row = run_command("workflows_status").splitlines()
    assert header.split() == [
        "ID",
        "WORKFLOW",
        "VERSION",
        "STATUS",
        "BUSINESS",
        "KEY",
        "CREATED",
        "UPDATED",
        "TAGS",
    ]
    assert row.split()[:5] == [str(run.pk), "commands_simple", "1", "completed", "B-7"]


def test_status_says_when_nothing_matches():
    assert run_command("workflows_status", "--status", "cancelled") == "no runs match\n"
    assert run_json("workflows_status") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--status", "done"], "argument --status: invalid choice: 'done'"),
        (["--limit", "0"], "argument --limit: must be a positive integer, got '0'"),
        (["--limit", "many"], "argument --limit: must be a positive integer, got 'many'"),
    ],
)
def test_status_refuses_bad_options(args, message):
    with pytest.raises(CommandError, match=message):
        run_command("workflows_status", *args)


# workflows_show


def test_show_prints_the_run_its_steps_and_history():
    run = finished_run("commands_declined", {"order": "A-1"})
    output = run_command("workflows_show", str(run.pk))
    assert f"run              {run.pk}" in output
    assert "status           failed" in output
    assert 'input            {"order":"A-1"}' in output
    assert '"code":"step_failed"' in output
    steps, history = output.split("\nsteps\n")[1].split("\nhistory\n")
    charge = steps.splitlines()[1]
    step_id = run.steps.get(name="charge").pk
    assert charge.split()[:7] == [str(step_id), "charge", "task", "failed", "1", "1/1", "inline"]
    assert charge.endswith("  card declined")
    types = [line.split()[2] for line in history.splitlines()[1:]]
    assert types == list(run.events.values_list("type", flat=True))
    assert types[0] == "run.started"
    assert "run.failed" in types


def test_show_says_which_round_a_loop_is_in_and_what_ends_it(django_user_model):
    reviewer = django_user_model.objects.create_user("reviewer")
    run = review_in_round(3, reviewer)
    output = run_command("workflows_show", str(run.pk))
    loops = output.split("\nloops\n")[1].split("\nallowed actions\n")[0].splitlines()
    assert loops[0].split() == ["LOOP", "KIND", "ROUND", "OF", "AT", "MOST", "ENDS", "WHEN"]
    assert loops[1].split()[:4] == ["again", "loop", "3", "5"]
    assert "after 5 iterations (then the run fails)" in loops[1]
    assert "while_" not in output
    steps = output.split("\nsteps\n")[1].split("\nhistory\n")[0].splitlines()
    review = next(line for line in steps if " review " in line)
    assert review.split()[1:5] == ["review", "gate", "waiting", "3"]


def test_show_json_has_the_run_steps_and_events_in_order():
    run = finished_run("commands_simple", {"n": 3})
    data = run_json("workflows_show", str(run.pk))
    assert (data["id"], data["status"]) == (str(run.pk), "completed")
    assert data["input"] == {"n": 3}
    assert data["output"] == {"second": {"n": 3}}
    assert data["error"] is None
    assert [(s["name"], s["status"], s["attempt"]) for s in data["steps"]] == [
        ("first", "completed", 1),
        ("second", "completed", 1),
    ]
    assert [e["id"] for e in data["events"]] == sorted(e["id"] for e in data["events"])
    completed = [e["step"] for e in data["events"] if e["type"] == "step.completed"]
    assert completed == ["first", "second"]
    assert data["events"][0]["payload"]["workflow"] == "commands_simple"


def test_show_names_an_unknown_or_malformed_run_id():
    with pytest.raises(CommandError, match="no run has id 00000000-0000-0000-0000-000000000000"):
        run_command("workflows_show", "00000000-0000-0000-0000-000000000000")
    with pytest.raises(CommandError, match="'not-a-run' is neither a run id nor a prefix of one"):
        run_command("workflows_show", "not-a-run")


def test_describe_run_raises_run_not_found():
    with pytest.raises(workflows.RunNotFound) as missing:
        describe_run("42")
    assert missing.value.code == "run_not_found"


# workflows_check


def report_of(reports: list[dict[str, Any]], name: str) -> dict[str, Any]:
    [report] = [report for report in reports if report["name"] == name]
    return report


def test_check_lists_every_registered_workflow():
    output = run_command("workflows_check")
    assert "commands_simple" in output
    assert output.endswith("workflow definition(s), no problems\n")
    reports = run_json("workflows_check")
    assert report_of(reports, "commands_simple") == {
        "name": "commands_simple",
        "version": 1,
        "steps": 2,
        "problems": [],
    }
    versions = [(r["name"], r["version"]) for r in reports if r["name"] == "commands_branching"]
    assert versions == [("commands_branching", 1), ("commands_branching", 2)]


def test_check_reports_a_handler_that_moved_and_exits_non_zero(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "replaceable", None)
    out = StringIO()
    with pytest.raises(CommandError, match=r"1 problem\(s\) in 1 workflow definition\(s\)"):
        call_command("workflows_check", stdout=out)
    assert f"- workflow 'commands_movable' v1, step 'only': handler '{HERE}.replaceable'" in (
        out.getvalue()
    )
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("workflows_check", "--json", stdout=out)
    [problem] = report_of(json.loads(out.getvalue()), "commands_movable")["problems"]
    assert "is not callable" in problem


# workflows_graph


def test_graph_prints_the_latest_version_as_mermaid():
    output = run_command("workflows_graph", "commands_branching")
    assert output.startswith("%% commands_branching v2\nflowchart TD\n")
    assert "    step_start --> step_end\n" in output


def test_graph_of_an_older_version_as_dot_marks_conditional_steps():
    output = run_command("workflows_graph", "commands_branching", "--version", "1", "--format=dot")
    assert output.startswith('digraph "commands_branching v1" {\n')
    assert '    "wrap" [label="wrap? (task)", style=dashed];\n' in output
    assert '    "nap" [label="nap (sleep)"];\n' in output
    assert '    "start" -> "wrap" [style=dashed];\n' in output
    assert '    "nap" -> "end";\n' in output


def test_graph_draws_a_loop_going_back_to_its_back_to_step_in_both_notations():
    mermaid = run_command("workflows_graph", "loop_review_pages")
    assert "    step_draft --> step_review\n" in mermaid
    assert '    step_again -. "while, max 5" .-> step_draft' in mermaid
    dot = run_command("workflows_graph", "loop_review_pages", "--format=dot")
    assert '    "again" [label="again (loop)"];\n' in dot
    assert '    "again" -> "draft" [style=dotted, constraint=false, label="while, max 5"];\n' in dot


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["commands_nope"], "no workflow named 'commands_nope' is registered"),
        (["commands_branching", "--version", "3"], "'commands_branching' v3 is not registered"),
        (["commands_branching", "--version", "two"], "argument --version: invalid int value"),
        (["commands_branching", "--format", "png"], "argument --format: invalid choice: 'png'"),
    ],
)
def test_graph_refuses_unknown_workflows_versions_and_formats(args, message):
    with pytest.raises(CommandError, match=message):
        run_command("workflows_graph", *args)


# workflows_purge


def finished_days_ago(days: float) -> Run:
    run = finished_run("commands_simple")
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=days))
    return run


def test_purge_deletes_only_runs_finished_before_the_cut_off():
    old, recent = finished_days_ago(10), finished_days_ago(2)
    active = workflows.start_run("commands_simple", {})
    dry_run = run_command("workflows_purge", "--older-than", "7", "--dry-run")
    assert dry_run.startswith("would delete 1 run(s) that ended before ")
    assert dry_run.endswith(", with 0 child run(s), 2 step(s) and 7 event(s)\n")
    assert Run.objects.count() == 3
    output = run_command("workflows_purge", "--older-than", "7").splitlines()
    # The run, its 2 steps and 7 events.
    assert output[0].startswith("1 run(s) and 10 row(s) deleted in 1 batch(es), ")
    assert "runs/s; batch time p50 " in output[0] and " ms, max " in output[0]
    assert output[1].startswith("deleted 1 run(s) that ended before ")
    assert len(output) == 2
    assert set(Run.objects.values_list("pk", flat=True)) == {recent.pk, active.pk}
    assert not Step.objects.filter(run_id=old.pk).exists()
    assert not Event.objects.filter(run_id=old.pk).exists()


def test_purge_json_returns_the_counts_and_the_batch_times():
    finished_days_ago(1)
    dry = run_json("workflows_purge", "--older-than", "0.5", "--dry-run")
    assert {key: dry[key] for key in ("dry_run", "runs", "child_runs", "steps")} == {
        "dry_run": True,
        "runs": 1,
        "child_runs": 0,
        "steps": 2,
    }
    done = run_json("workflows_purge", "--older-than", "0.5", "--batch-ms", "50")
    assert {key: done[key] for key in ("runs", "child_runs", "flows", "batches", "stopped")} == {
        "runs": 1,
        "child_runs": 0,
        "flows": 0,
        "batches": 1,
        "stopped": "done",
    }
    assert done["batch_ms_max"] >= done["batch_ms_p50"] > 0
    assert set(done) >= {"rows", "kept", "seconds", "runs_per_second", "batch_ms_p99"}
    assert not Run.objects.exists()


def test_purge_before_an_instant_and_the_earlier_of_two_cutoffs():
    old, recent = finished_days_ago(10), finished_days_ago(4)
    instant = (timezone.now() - timedelta(days=3)).isoformat()
    # --older-than 7 is the earlier cutoff: the run 4 days old stays.
    run_command("workflows_purge", "--before", instant, "--older-than", "7")
    assert set(Run.objects.values_list("pk", flat=True)) == {recent.pk}
    run_command("workflows_purge", "--before", instant)
    assert not Run.objects.exists()
    assert old.pk


def test_purge_prints_its_progress_as_it_goes(monkeypatch):
    from workflows.management.commands import workflows_purge

    monkeypatch.setattr(workflows_purge, "PROGRESS_EVERY", 0.0)  # a line per batch
    for _ in range(25):
        finished_days_ago(10)
    # A target no batch reaches: the size grows by half each batch, 10 then 15.
    lines = run_command("workflows_purge", "--older-than", "7", "--batch-ms", "100000")
    lines = lines.splitlines()
    assert lines[0].startswith("10 run(s) and 100 row(s) deleted in 1 batch(es), ")
    assert lines[1].startswith("25 run(s) and 250 row(s) deleted in 2 batch(es), ")
    assert lines[-1].startswith("deleted 25 run(s) that ended before ")


def test_purge_stops_at_max_runs_says_so_and_goes_on_when_run_again():
    for _ in range(3):
        finished_days_ago(10)
    output = run_command("workflows_purge", "--older-than", "7", "--max-runs", "2")
    assert "deleted 2 run(s)" in output
    assert output.endswith("stopped at --max-runs; run the same command again to go on\n")
    assert Run.objects.count() == 1
    assert "deleted 1 run(s)" in run_command("workflows_purge", "--older-than", "7")
    assert not Run.objects.exists()


@pytest.mark.parametrize("days", ["0", "-3", "soon", "nan", "inf", "1e12"])
def test_purge_refuses_a_non_positive_or_impossible_age(days):
    finished_days_ago(10)
    with pytest.raises(CommandError, match="argument --older-than: DAYS must be a positive"):
        run_command("workflows_purge", f"--older-than={days}")
    assert Run.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "say which runs to delete: --older-than DAYS, --before DATETIME, or both"),
        (("--before", "yesterday"), "argument --before: not an ISO 8601 date and time"),
        (("--before", "2026-01-01T00:00:00"), "has no UTC offset"),
        (("--before", "2999-01-01T00:00:00Z"), "is in the future"),
        (("--older-than", "7", "--batch-ms", "0"), "argument --batch-ms: must be a positive"),
        (("--older-than", "7", "--max-runs", "-1"), "argument --max-runs: must be a positive"),
        (("--older-than", "7", "--time-limit", "x"), "argument --time-limit: must be a positive"),
    ],
)
def test_purge_refuses_bad_input_naming_it(args, message):
    finished_days_ago(10)
    with pytest.raises(CommandError, match=re.escape(message)):
        run_command("workflows_purge", *args)
    assert Run.objects.count() == 1


def test_purge_help_says_it_is_resumable(capsys):
    with pytest.raises(SystemExit):
        call_command("workflows_purge", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "Resumable: a purge stopped at any point" in text
    assert "--batch-ms MS" in text and "--before DATETIME" in text


def test_a_run_is_named_by_a_unique_id_prefix_or_business_key_and_nothing_ambiguous():
    first = workflows.start_run(Simple, business_key="shared")
    workflows.start_run(Simple, business_key="shared")
    out = StringIO()
    call_command("workflows_show", str(first.pk)[:8], stdout=out)
    assert str(first.pk) in out.getvalue()
    with pytest.raises(CommandError, match="more than one run has business key 'shared'"):
        call_command("workflows_show", "--business-key", "shared")
    with pytest.raises(CommandError, match="no run has business key 'nobody'"):
        call_command("workflows_show", "--business-key", "nobody")
    with pytest.raises(CommandError, match="no run has id prefix 'ffffffff'"):
        call_command("workflows_show", "ffffffff")
    with pytest.raises(CommandError, match="at least 4 hexadecimal characters"):
        call_command("workflows_show", "ab")
    with pytest.raises(CommandError, match="exactly one of them"):
        call_command("workflows_show", str(first.pk), "--business-key", "shared")
