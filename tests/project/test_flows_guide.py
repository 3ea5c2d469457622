"""docs/guide/flows.md's commands build the flow it describes: the ``workflows_flow``
lines of its ``sh`` blocks, run against its example project (its Python blocks run with
every page's, in :mod:`tests.project.test_docs_examples`)."""

from __future__ import annotations

import shlex
from io import StringIO

import pytest
from django.core.management import call_command

from tests.support.doc_examples import PAGES, code_blocks, page_example
from workflows.models import Flow
from workflows.testing import run_pending

GUIDE = "guide/flows.md"


def shell_commands(markdown: str) -> list[list[str]]:
    """The ``workflows_flow`` command lines of the page's ``sh`` blocks, each split as a
    shell splits it (a line ending in a backslash goes on on the next)."""
    lines = [
        shlex.split(line)
        for language, code in code_blocks(markdown)
        if language == "sh"
        for line in code.replace("\\\n", " ").splitlines()
    ]
    return [words for words in lines if words[1:3] == ["manage.py", "workflows_flow"]]


@pytest.mark.django_db
def test_the_guides_commands_build_the_flow_they_describe():
    commands = shell_commands(PAGES[GUIDE].read_text())
    assert [words[3] for words in commands] == ["create", "add", "add", "add", "edge", "seal"]
    with page_example(GUIDE):
        for words in commands:
            call_command(*words[2:], stdout=StringIO())
        run_pending()
    flow = Flow.objects.get(key="build-1.0")
    assert flow.status == "completed"
    lib = flow.runs.get(flow_member__name="lib")
    assert lib.steps.get().output == {"artifact": "lib.o", "from": ["codegen.o", "proto.o"]}
