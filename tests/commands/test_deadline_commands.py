"""Deadlines from the shell: ``workflows_start --deadline``, a new one on
``workflows_retry`` and ``workflows_rerun``, and ``workflows_show`` says the time left."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management.base import CommandError
from django.utils import timezone

from tests.support.commands import run_command
from tests.support.handlers import WORK
from workflows import Task, WaitForSignal, Workflow
from workflows.engine.sql.clock import database_now
from workflows.models import Run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


class Errand(Workflow):
    name = "cmd_deadline_errand"
    wait = WaitForSignal("done")
    close = Task(WORK)


def test_start_takes_a_deadline_in_seconds_a_duration_or_a_moment():
    before = database_now()
    started = json.loads(
        run_command(
            "workflows_start", Errand.name, "--input", "{}", "--json", "--deadline", "PT45M"
        )
    )
    run = Run.objects.get(pk=started["id"])
    assert before + timedelta(minutes=45) <= run.deadline <= database_now() + timedelta(minutes=45)
    when = (timezone.now() + timedelta(days=1)).replace(microsecond=0)
    started = json.loads(
        run_command(
            "workflows_start",
            Errand.name,
            "--input",
            "{}",
            "--json",
            "--deadline",
            when.isoformat(),
        )
    )
    assert Run.objects.get(pk=started["id"]).deadline == when
    shown = run_command("workflows_show", started["id"])
    assert "time left" in shown and "deadline" in shown


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("later", "a deadline is seconds, an ISO 8601 duration"),
        ("-60", "deadline must be a positive duration"),
        ("2001-01-01T00:00:00+00:00", "is not in the future"),
        ("2030-01-01T00:00:00", "has no timezone"),
    ],
)
def test_start_refuses_a_bad_deadline_in_one_line(value: str, words: str):
    with pytest.raises(CommandError, match=words):
        run_command("workflows_start", Errand.name, "--input", "{}", "--deadline", value)
    assert not Run.objects.exists()


def test_retry_and_rerun_take_a_new_deadline():
    run_id = json.loads(
        run_command("workflows_start", Errand.name, "--input", "{}", "--json", "--deadline", "60")
    )["id"]
    run_pending(until=timezone.now() + timedelta(minutes=5))
    assert Run.objects.get(pk=run_id).error["code"] == "deadline_exceeded"
    shown = run_command("workflows_show", run_id)
    assert "deadline_exceeded" in shown
    run_command("workflows_retry", run_id, "--deadline", "3600")
    assert Run.objects.get(pk=run_id).deadline is not None
    run_command("workflows_cancel", run_id)
    run_pending()
    run_command("workflows_rerun", run_id, "--from", "wait")
    assert Run.objects.get(pk=run_id).deadline is None
    with pytest.raises(CommandError, match="--deadline: not allowed with argument --step"):
        run_command("workflows_retry", "--step", "1", "--deadline", "60")
