"""workflows_signal_token: an operator makes the token an outside system posts."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.core.management.base import CommandError

import workflows
from tests.support.commands import run_command
from workflows import WaitForSignal, Workflow
from workflows.models import Signal
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


class Paid(Workflow):
    name = "token_command_paid"
    payment = WaitForSignal("paid")


def token_command(*args: str) -> str:
    return run_command("workflows_signal_token", *args).strip()


def test_the_printed_token_delivers_its_signal_once():
    run = workflows.start_run(Paid)
    token = token_command(str(run.pk), "paid", "--expires-in", "P3D")
    workflows.send_signal_with_token(token, {"amount": 12})
    workflows.send_signal_with_token(token, {"amount": 12})  # the same token: one signal
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert list(Signal.objects.filter(run=run).values_list("name", "payload")) == [
        ("paid", {"amount": 12})
    ]


def test_json_names_the_run_signal_and_expiry():
    run = workflows.start_run(Paid)
    shown = json.loads(token_command(str(run.pk), "paid", "--expires-in", "3600", "--json"))
    assert (shown["run"], shown["signal"], shown["expires_in"]) == (str(run.pk), "paid", 3600)
    assert workflows.send_signal_with_token(shown["token"], None).name == "paid"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("paid", "--expires-in", "soon"), "a duration is seconds (3600) or an ISO 8601"),
        (("paid", "--expires-in", "P1000D"), "longer than WORKFLOWS['SIGNAL_TOKEN_MAX_AGE']"),
        (("shipped",), "shipped"),
    ],
)
def test_a_refusal_names_the_problem_and_makes_no_token(args, message):
    run = workflows.start_run(Paid)
    with pytest.raises(CommandError, match=re.escape(message)):
        token_command(str(run.pk), *args)


def test_an_unknown_run_is_refused():
    with pytest.raises(CommandError, match="run"):
        token_command("00000000-0000-0000-0000-000000000000", "paid", "--expires-in", "60")


def test_the_default_expiry_is_seven_days():
    run = workflows.start_run(Paid)
    shown = json.loads(token_command(str(run.pk), "paid", "--json"))
    assert shown["expires_in"] == timedelta(days=7).total_seconds()
