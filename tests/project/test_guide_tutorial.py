"""docs/guide/tutorial.md runs: every Python block of the page is executed here.

Each ```python block starts with a comment naming the file it belongs to
(``# shop/flows.py``, ``# shop/tests.py``); blocks of one file are joined in page order,
as a reader copying them would. ``shop/flows.py`` becomes a fresh module (so its
handlers import by dotted path, as the engine needs), ``shop/tests.py`` is executed in a
module namespace of its own, and each of its ``test_*`` functions is run here with the
pytest fixtures it names. Shell blocks (```sh) are not executed.
"""

from __future__ import annotations

import ast
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workflows.definitions import Workflow, registry

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "guide" / "tutorial.md"
FLOWS, TESTS = "shop/flows.py", "shop/tests.py"
# Unique to this test, so the tutorial's module never shadows a real one.
FLOWS_MODULE = "guide_tutorial_shop_flows"
FENCE = re.compile(r"^```([\w+-]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
HEADER = re.compile(r"#\s*(\S+\.py)\s*$")


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """Return (language, code) of every fenced block, in page order."""
    return [(match[1], match[2]) for match in FENCE.finditer(markdown)]


def python_files(markdown: str) -> dict[str, str]:
    """Join the Python blocks by the file their first line names."""
    files: dict[str, list[str]] = {}
    for language, code in code_blocks(markdown):
        if language != "python":
            continue
        first_line = code.splitlines()[0] if code else ""
        header = HEADER.fullmatch(first_line)
        assert header, f"a python block of the tutorial names no file: {first_line!r}"
        files.setdefault(header[1], []).append(code)
    return {name: "\n".join(blocks) for name, blocks in files.items()}


FILES = python_files(TUTORIAL.read_text())


def test_the_tutorial_has_only_files_this_test_runs():
    assert set(FILES) == {FLOWS, TESTS}


def test_the_parser_finds_every_block():
    blocks = code_blocks("text\n```python\n# a.py\nx = 1\n```\n\n```sh\nls\n```\n")
    assert blocks == [("python", "# a.py\nx = 1\n"), ("sh", "ls\n")]
    assert python_files("```python\n# a.py\nx = 1\n```\n```python\n# a.py\ny = 2\n```\n") == {
        "a.py": "# a.py\nx = 1\n\n# a.py\ny = 2\n"
    }


def tutorial_tests() -> list[str]:
    tree = ast.parse(FILES[TESTS])
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


@pytest.fixture
def tutorial() -> Iterator[dict[str, Any]]:
    """Import the tutorial's flows.py and tests.py; unregister its workflows afterwards."""
    flows = types.ModuleType(FLOWS_MODULE)
    flows.__file__ = str(TUTORIAL)
    sys.modules[FLOWS_MODULE] = flows
    try:
        exec(compile(FILES[FLOWS], f"{TUTORIAL}:{FLOWS}", "exec"), flows.__dict__)
        defined = [
            value
            for value in vars(flows).values()
            if isinstance(value, type) and issubclass(value, Workflow) and value is not Workflow
        ]
        assert defined, "the tutorial's flows.py defines no workflow"
        namespace: dict[str, Any] = {"__name__": "guide_tutorial_shop_tests"}
        exec(compile(FILES[TESTS], f"{TUTORIAL}:{TESTS}", "exec"), namespace)
        yield namespace
    finally:
        for workflow in [w for w in registry.all() if w.__module__ == FLOWS_MODULE]:
            registry.unregister(workflow.name, workflow.version)
        sys.modules.pop(FLOWS_MODULE, None)


def test_the_tutorial_has_tests():
    assert len(tutorial_tests()) >= 3


@pytest.mark.django_db
@pytest.mark.parametrize("name", tutorial_tests())
def test_tutorial_block(name: str, tutorial: dict[str, Any], request: pytest.FixtureRequest):
    test = tutorial[name]
    fixtures = {
        parameter: request.getfixturevalue(parameter)
        for parameter in test.__code__.co_varnames[: test.__code__.co_argcount]
    }
    test(**fixtures)
