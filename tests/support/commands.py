"""Management commands called as an operator calls them: what they print, their ``--json``
output, and a refusal that must leave the history as it was."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from workflows.models import Event


def run_command(name: str, *args: str) -> str:
    """What the command ``name`` writes to stdout when called with ``args``."""
    out = StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue()


def run_json(name: str, *args: str) -> Any:
    """The command's ``--json`` output, parsed."""
    return json.loads(run_command(name, *args, "--json"))


def refused(name: str, *args: str, message: str) -> CommandError:
    """Call a command that must fail with ``message`` (a literal) and write no history;
    return its error."""
    events = Event.objects.count()
    with pytest.raises(CommandError, match=re.escape(message)) as refusal:
        run_command(name, *args)
    assert Event.objects.count() == events
    return refusal.value
