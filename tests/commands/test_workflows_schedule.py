"""``workflows_schedule`` (list, show, create, pause, unpause, trigger, backfill, delete run
schedules): what each prints, its ``--json``, and refusals that name the problem, exit 1
and change nothing; and that its help and ``workflows_schedules``' tell the two apart."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import load_command_class
from django.db import connection

import workflows
from tests.acceptance.harness import MANAGE, database_url
from tests.support import commands
from tests.support.workflows import Echo, Work
from workflows.models import Run, Schedule
from workflows.queries.schedules import describe_spec, interval_words
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def run_command(*args: str) -> str:
    return commands.run_command("workflows_schedule", *args)


def run_json(*args: str) -> Any:
    return commands.run_json("workflows_schedule", *args)


def refused(*args: str, message: str) -> None:
    """``workflows_schedule *args`` must fail with ``message`` and change no schedule."""
    before = list(Schedule.objects.values_list("key", "paused", "version", "spec_hash"))
    runs = Run.objects.count()
    commands.refused("workflows_schedule", *args, message=message)
    assert list(Schedule.objects.values_list("key", "paused", "version", "spec_hash")) == before
    assert Run.objects.count() == runs


def every_minute(key: str = "beat") -> Schedule:
    return workflows.create_schedule(Work, key=key, every=timedelta(minutes=1))


# -- describe_spec -----------------------------------------------------------------------------


def test_the_spec_in_words():
    nightly = workflows.create_schedule(Work, key="n", cron="0 2 * * *", tz="Europe/Berlin")
    assert describe_spec(nightly) == "At 02:00 every day (Europe/Berlin)"
    assert describe_spec(every_minute()) == "every minute"
    assert [interval_words(timedelta(seconds=s)) for s in (90, 300, 7200, 86400)] == [
        "every 90 seconds",
        "every 5 minutes",
        "every 2 hours",
        "every day",
    ]


# -- create ------------------------------------------------------------------------------------


def test_create_with_every_option_and_again_changes_nothing():
    args = (
        "create", Echo.name, "--key", "nightly", "--cron", "0 2 * * *", "--tz", "Europe/Berlin",
        "--input", '{"value": 7}', "--overlap", "buffer_one", "--catchup-window", "30m",
        "--jitter", "10s", "--start-at", "2026-01-01T00:00:00Z", "--end-at",
        "2030-01-01T00:00:00+01:00", "--note", "the report",
    )  # fmt: skip
    assert run_command(*args).strip() == (
        "created schedule 'nightly' (support_echo): At 02:00 every day (Europe/Berlin), active"
    )
    made = Schedule.objects.get(key="nightly")
    assert (made.cron, made.tz, made.input, made.overlap) == (
        "0 2 * * *", "Europe/Berlin", {"value": 7}, "buffer_one",
    )  # fmt: skip
    assert (made.catchup_window, made.jitter) == (timedelta(minutes=30), timedelta(seconds=10))
    assert made.start_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert made.end_at == datetime(2029, 12, 31, 23, tzinfo=UTC)
    again = run_command(*args).strip()
    assert again.endswith("; made before with this key, unchanged")
    assert Schedule.objects.count() == 1


@pytest.mark.parametrize(
    ("every", "seconds"), [("90s", 90), ("5m", 300), ("1h", 3600), ("45", 45), ("2d", 172800)]
)
def test_create_every_takes_units_or_seconds(every, seconds):
    shown = run_json("create", Work.name, "--key", "k", "--every", every, "--paused")
    assert (shown["every"], shown["paused"], shown["created"]) == (seconds, True, True)
    assert Schedule.objects.get(key="k").every == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cron", "61 * * * *"), "cron"),
        (("--every", "5 minutes"), "--every is a whole number of seconds or a number with s"),
        (("--every", "0"), "every"),
        (("--cron", "* * * * *", "--every", "5m"), "cron"),
        ((), "cron"),
        (("--every", "5m", "--tz", "Mars/Olympus"), "Mars/Olympus"),
        (("--every", "5m", "--overlap", "sometimes"), "overlap"),
        (("--every", "5m", "--input", "[1]"), "--input must be a JSON object, got '[1]'"),
        (("--every", "5m", "--input", "{nope"), "--input not valid JSON"),
        (("--every", "5m", "--start-at", "tomorrow"), "--start-at is an ISO 8601 date and time"),
        (("--every", "5m", "--end-at", "2030-01-01T00:00"), "--end-at '2030-01-01T00:00' has no"),
    ],
)
def test_create_refusals_name_the_problem(args, message):
    refused("create", Work.name, "--key", "bad", *args, message=message)
    assert not Schedule.objects.exists()


def test_create_refuses_an_unknown_workflow_and_another_spec_under_a_key():
    refused("create", "no_such", "--key", "x", "--every", "5m", message="no_such")
    every_minute("beat")
    refused("create", Work.name, "--key", "beat", "--every", "2m", message="beat")


# -- list and show -----------------------------------------------------------------------------


def test_list_shows_key_workflow_spec_next_fire_paused_and_counts():
    assert run_command("list").strip() == "no run schedules"
    beat = every_minute("beat")
    workflows.create_schedule(Echo, key="nightly", cron="0 2 * * *", paused=True)
    lines = run_command("list").splitlines()
    assert lines[0].split() == [
        "KEY", "WORKFLOW", "SPEC", "NEXT", "FIRE", "PAUSED", "FIRED", "SKIPPED", "MISSED",
    ]  # fmt: skip
    assert lines[1].split()[:4] == ["beat", "support_work", "every", "minute"]
    assert beat.next_fire_at is not None
    assert beat.next_fire_at.isoformat(timespec="seconds") in lines[1]
    assert lines[1].split()[-4:] == ["no", "0", "0", "0"]
    assert lines[2].startswith("nightly") and "At 02:00 every day" in lines[2]
    assert lines[2].split()[-4:] == ["yes", "0", "0", "0"]
    listed = run_json("list", "--workflow", Echo.name)
    assert [(s["key"], s["spec_in_words"], s["paused"]) for s in listed] == [
        ("nightly", "At 02:00 every day", True)
    ]


def test_show_prints_spec_state_next_fires_in_both_zones_and_last_runs():
    workflows.create_schedule(Work, key="nightly", cron="0 2 * * *", tz="Europe/Berlin")
    text = run_command("show", "nightly")
    lines = text.splitlines()
    assert (
        lines[0] == "schedule 'nightly' (support_work): At 02:00 every day (Europe/Berlin), active"
    )
    assert "  spec: cron '0 2 * * *' in Europe/Berlin" in lines
    assert "no runs yet" in lines
    fires = lines[lines.index("next fire times (UTC / Europe/Berlin):") + 1 :][:5]
    for fire in fires:
        utc, local = fire.strip().split(" / ")
        assert datetime.fromisoformat(utc) == datetime.fromisoformat(local)
        assert datetime.fromisoformat(local).hour == 2
    run = workflows.trigger_schedule("nightly")
    shown = run_json("show", "nightly")
    assert len(shown["next_fire_times"]) == 5
    assert [r["id"] for r in shown["runs"]] == [str(run.pk)]
    assert str(run.pk) in run_command("show", "nightly")


def test_show_refuses_an_unknown_key():
    refused("show", "nobody", message="no schedule has the key 'nobody'")


# -- pause, unpause, trigger, delete -----------------------------------------------------------


def test_pause_with_a_note_then_unpause():
    every_minute("beat")
    line = run_command("pause", "beat", "--note", "migration").strip()
    assert line == "schedule 'beat' (support_work): every minute, paused (migration)"
    assert Schedule.objects.get(key="beat").paused
    shown = run_json("unpause", "beat")
    assert (shown["paused"], shown["note"]) == (False, "")
    refused("pause", "nobody", message="no schedule has the key 'nobody'")
    refused("unpause", "nobody", message="no schedule has the key 'nobody'")


def test_trigger_starts_one_run_now():
    every_minute("beat")
    line = run_command("trigger", "beat").strip()
    run = Run.objects.get(schedule__key="beat")
    assert line.startswith(f"triggered schedule 'beat': run {run.pk} of support_work")
    shown = run_json("trigger", "beat")
    assert shown["workflow"] == Work.name and shown["scheduled_for"]
    assert Run.objects.filter(schedule__key="beat").count() == 2
    refused("trigger", "nobody", message="no schedule has the key 'nobody'")


def test_delete_keeps_the_runs():
    every_minute("beat")
    workflows.trigger_schedule("beat")
    assert run_command("delete", "beat").strip() == (
        "deleted schedule 'beat' (support_work): every minute, active; its runs and events stay"
    )
    assert not Schedule.objects.exists() and Run.objects.count() == 1
    every_minute("again")
    assert run_json("delete", "again")["deleted"] is True
    refused("delete", "beat", message="no schedule has the key 'beat'")


# -- backfill ----------------------------------------------------------------------------------


def test_backfill_dry_run_counts_then_starts_one_run_per_slot_once():
    every_minute("beat")
    end = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    start = end - timedelta(minutes=3)
    window = ("--start", start.isoformat(), "--end", end.isoformat())
    dry = run_command("backfill", "beat", *window, "--dry-run").strip()
    assert dry == "dry run: 3 slots, 0 with a run already; would start 3 runs"
    assert not Run.objects.exists()
    lines = run_command("backfill", "beat", *window).splitlines()
    assert lines[0] == "3 slots, 0 with a run already; started 3 runs"
    slots = sorted(Run.objects.values_list("scheduled_for", flat=True))
    assert slots == [start + timedelta(minutes=n) for n in range(3)]
    again = run_json("backfill", "beat", *window)
    assert (again["slots"], again["existing"], again["started"]) == (3, 3, [])
    assert Run.objects.count() == 3


def test_backfill_refusals():
    every_minute("beat")
    now = datetime.now(UTC)
    past = (now - timedelta(hours=1)).isoformat()
    future = (now + timedelta(hours=1)).isoformat()
    refused("backfill", "beat", "--start", past, "--end", future, message="is in the future")
    refused("backfill", "beat", "--start", past, "--end", past, message="end must be after start")
    refused("backfill", "beat", "--start", "x", "--end", past, message="--start is an ISO 8601")
    refused("backfill", "nobody", "--start", past, "--end", past, message="no schedule has")


# -- the two commands' help ----------------------------------------------------------------


def help_of(command: str) -> str:
    out = StringIO()
    parser = load_command_class("workflows", command).create_parser("manage.py", command)
    parser.print_help(out)
    return " ".join(out.getvalue().split())


def test_each_commands_help_names_the_other():
    run_schedules, scanner_schedules = help_of("workflows_schedule"), help_of("workflows_schedules")
    assert run_schedules.startswith("usage: manage.py workflows_schedule")
    assert "Run schedules: start runs of a workflow on a calendar" in run_schedules
    assert "workflows_schedules (plural), which installs the scanners' django-q2" in run_schedules
    assert "the scanners' django-q2 schedules" in scanner_schedules
    assert "Not run schedules" in scanner_schedules and "workflows_schedule (singular)" in (
        scanner_schedules
    )


def test_run_pending_fires_what_the_command_created():
    run_command("create", Work.name, "--key", "beat", "--every", "1m")
    run_pending(until=datetime.now(UTC) + timedelta(minutes=3))
    assert run_json("show", "beat")["fired_count"] >= 3


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_from_the_shell_a_refusal_exits_1_with_one_clear_line():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url(connection.settings_dict),
    }

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(MANAGE), "workflows_schedule", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    for args, message in (
        (("show", "nobody"), "no schedule has the key 'nobody'"),
        (("create", Work.name, "--key", "k", "--every", "soon"), "--every is a whole number"),
    ):
        done = manage(*args)
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"CommandError: {message}")
