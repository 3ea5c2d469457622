"""``workflows_business_key``, ``workflows_dismiss`` and ``workflows_undismiss``: the
service each calls, its printed line, its refusals (exit status 1, nothing written)."""

from __future__ import annotations

import pytest

import workflows
from tests.engine.runs.test_run_metadata import Fails, Keyed, Waits
from tests.support.commands import refused, run_command, run_json
from tests.support.runs import run_inline
from workflows.models import Event, Run

pytestmark = pytest.mark.django_db


def test_business_key_sets_the_key_and_refuses_one_in_use():
    workflows.start_run(Keyed, business_key="ORDER-1")
    run = workflows.start_run(Keyed)
    line = run_command("workflows_business_key", str(run.pk), "ORDER-2")
    assert line.strip().endswith(": waiting, business key 'ORDER-2'")
    assert Run.objects.get(pk=run.pk).business_key == "ORDER-2"
    # The run named by the key it holds now.
    assert (
        run_json("workflows_business_key", "--business-key", "ORDER-2", "ORDER-3")["business_key"]
        == "ORDER-3"
    )
    refused(
        "workflows_business_key",
        str(run.pk),
        "ORDER-1",
        message="business key 'ORDER-1' is held by another live run of 'meta_keyed'",
    )


def test_business_key_refuses_an_ended_run():
    run = run_inline(Fails)
    refused("workflows_business_key", str(run.pk), "X", message="business_key needs")


def test_dismiss_and_undismiss_record_who():
    run = run_inline(Fails)
    line = run_command("workflows_dismiss", str(run.pk))
    assert line.strip().endswith(": failed, dismissed")
    assert Run.objects.get(pk=run.pk).dismissed_at is not None
    assert run_json("workflows_undismiss", str(run.pk))["dismissed_at"] is None
    types = list(Event.objects.filter(run=run).values_list("type", flat=True))
    assert types[-2:] == ["run.dismissed", "run.undismissed"]


def test_dismiss_refuses_a_live_run():
    run = workflows.start_run(Waits)
    refused("workflows_dismiss", str(run.pk), message="dismiss needs cancelled, compensated")


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("workflows_business_key", "unique_business_key"),
        ("workflows_dismiss", "attention"),
        ("workflows_undismiss", "Undismiss run RUN"),
        ("workflows_start", "--title"),
    ],
)
def test_help_says_how(command, says, capsys):
    with pytest.raises(SystemExit):
        run_command(command, "--help")
    assert says in capsys.readouterr().out
