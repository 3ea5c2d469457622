"""Issue #35, point 1 in the commands: ``workflows_retry`` and ``workflows_rerun`` of a
member a failed dependency cancelled exit non-zero with one line naming the upstream;
retrying the upstream heals the member."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import workflows
from tests.support.flows import finish
from tests.support.workflows import Echo
from workflows.models import Event, Run
from workflows.status import RunStatus

pytestmark = pytest.mark.django_db


def alpha_beta() -> tuple[Run, Run]:
    flow = workflows.create_flow("cmd-heal")
    alpha = workflows.add_to_flow(flow, Echo, {}, member="alpha")
    beta = workflows.add_to_flow(flow, Echo, {}, member="beta", after=["alpha"])
    workflows.seal_flow(flow)
    finish(alpha, fail=True)
    return alpha, beta


@pytest.mark.parametrize(
    "command,extra", [("workflows_retry", ()), ("workflows_rerun", ("--from", "answer"))]
)
def test_a_member_past_its_failed_dependency_is_refused_in_one_line(command, extra):
    _, beta = alpha_beta()
    events = Event.objects.count()
    with pytest.raises(CommandError, match=re.escape("'alpha' (failed)")) as raised:
        call_command(command, str(beta.pk), *extra, stdout=StringIO())
    assert "\n" not in str(raised.value)
    assert Event.objects.count() == events
    assert Run.objects.get(pk=beta.pk).status == RunStatus.CANCELLED


def test_retrying_the_upstream_heals_the_member():
    alpha, beta = alpha_beta()
    call_command("workflows_retry", str(alpha.pk), stdout=StringIO())
    assert Run.objects.get(pk=beta.pk).status == RunStatus.BLOCKED
