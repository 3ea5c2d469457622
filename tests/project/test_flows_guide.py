"""docs/guide/flows.md runs: its example (a small build system) is executed here.

The page's ```python blocks that start with ``# builds/flows.py`` or ``# builds/tests.py``
are joined by file in page order, as a reader copying them would (the tutorial's rule,
parsed by the tutorial's own test). ``builds/flows.py`` becomes the module
``builds.flows``, so ``builds/tests.py`` imports from it as a reader's project would and
the engine finds its handlers by dotted path; each ``test_*`` function of
``builds/tests.py`` is run here with the pytest fixtures it names. Blocks naming no file
(signatures, fragments) are not executed.
"""

from __future__ import annotations

import ast
import importlib.util
import shlex
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.project.test_guide_tutorial import HEADER, code_blocks
from workflows.definitions import Workflow, registry
from workflows.models import Flow
from workflows.testing import run_pending

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "flows.md"
PACKAGE = "builds"
FLOWS, TESTS = f"{PACKAGE}/flows.py", f"{PACKAGE}/tests.py"
FLOWS_MODULE = f"{PACKAGE}.flows"


def example_files(markdown: str) -> dict[str, str]:
    """The example's files: Python blocks whose first line names one, joined in order."""
    files: dict[str, list[str]] = {}
    for language, code in code_blocks(markdown):
        header = HEADER.fullmatch(code.splitlines()[0]) if language == "python" and code else None
        if header:
            files.setdefault(header[1], []).append(code)
    return {name: "\n".join(blocks) for name, blocks in files.items()}


FILES = example_files(GUIDE.read_text())


def test_the_guide_has_the_example_files_this_test_runs():
    assert set(FILES) == {FLOWS, TESTS}


def guide_test_names(source: str) -> list[str]:
    """The ``test_*`` functions a guide's tests file defines, in order."""
    tree = ast.parse(source)
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


def test_the_guide_has_tests():
    assert len(guide_test_names(FILES[TESTS])) >= 5


@contextmanager
def imported_example(guide: Path, files: dict[str, str], package: str) -> Iterator[dict[str, Any]]:
    """Import the guide's ``<package>/flows.py`` as ``<package>.flows`` and run its
    ``<package>/tests.py``, whose namespace is given; unregister its workflows and forget
    both modules afterwards. Shared with the other guides whose examples run."""
    flows_module = f"{package}.flows"
    assert importlib.util.find_spec(package) is None, f"a real module {package!r} is importable"
    module = types.ModuleType(package)
    module.__path__ = []
    flows = types.ModuleType(flows_module)
    flows.__file__ = str(guide)
    sys.modules[package], sys.modules[flows_module] = module, flows
    try:
        source = files[f"{package}/flows.py"]
        exec(compile(source, f"{guide}:{package}/flows.py", "exec"), flows.__dict__)
        namespace: dict[str, Any] = {"__name__": f"{package}.tests"}
        tests = files[f"{package}/tests.py"]
        exec(compile(tests, f"{guide}:{package}/tests.py", "exec"), namespace)
        yield namespace
    finally:
        for workflow in [w for w in registry.all() if w.__module__ == flows_module]:
            registry.unregister(workflow.name, workflow.version)
        sys.modules.pop(flows_module, None)
        sys.modules.pop(package, None)


def run_guide_test(test: Any, request: pytest.FixtureRequest) -> None:
    """Call one ``test_*`` function of a guide with the pytest fixtures it names."""
    fixtures = {
        parameter: request.getfixturevalue(parameter)
        for parameter in test.__code__.co_varnames[: test.__code__.co_argcount]
    }
    test(**fixtures)


@pytest.fixture
def example() -> Iterator[dict[str, Any]]:
    """The guide's example, imported (see :func:`imported_example`)."""
    with imported_example(GUIDE, FILES, PACKAGE) as namespace:
        yield namespace


@pytest.mark.django_db
@pytest.mark.parametrize("name", guide_test_names(FILES[TESTS]))
def test_guide_example(name: str, example: dict[str, Any], request: pytest.FixtureRequest):
    assert any(
        isinstance(value, type) and issubclass(value, Workflow)
        for value in vars(sys.modules[FLOWS_MODULE]).values()
    )
    run_guide_test(example[name], request)


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
def test_the_guides_commands_build_the_flow_they_describe(example):
    commands = shell_commands(GUIDE.read_text())
    assert [words[3] for words in commands] == ["create", "add", "add", "add", "edge", "seal"]
    for words in commands:
        call_command(*words[2:], stdout=StringIO())
    run_pending()
    flow = Flow.objects.get(key="build-1.0")
    assert flow.status == "completed"
    lib = flow.runs.get(flow_member__name="lib")
    assert lib.steps.get().output == {"artifact": "lib.o", "from": ["codegen.o", "proto.o"]}
