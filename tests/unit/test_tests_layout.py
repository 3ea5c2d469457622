"""The test suite's own layout: folders named after the code they test, and every test
that starts a process marked so that ``make test-fast`` can leave it out."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
APP = TESTS.parent / "workflows"

# Folders that are not a package of the app: the layers that run real processes, the
# tests without a database, the demo project, the operator commands
# (workflows/management/commands/), the settings of the routing test, the documentation
# site's hooks (docs/hooks/) and what the test modules share (support/).
LAYERS = {
    "acceptance",
    "browser",
    "install",
    "unit",
    "project",
    "commands",
    "routing",
    "docs",
    "support",
}
IN_REAL_PROCESSES = ("acceptance", "browser", "install")
STARTS_A_PROCESS = re.compile(
    r"\bsubprocess\.(run|Popen|call|check_\w+)\(|\bos\.fork\(|multiprocessing"
)


def test_each_folder_is_a_package_of_the_app_or_a_named_layer():
    packages = {path.name for path in APP.iterdir() if (path / "__init__.py").exists()}
    folders = {path.name for path in TESTS.iterdir() if (path / "__init__.py").exists()}
    assert folders - packages - LAYERS == set()


def test_a_test_that_starts_a_process_outside_the_process_layers_is_marked():
    unmarked = [
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("test_*.py")
        if path.relative_to(TESTS).parts[0] not in IN_REAL_PROCESSES
        and path != Path(__file__).resolve()
        and (STARTS_A_PROCESS.search(text := path.read_text()) or "build_wheel(" in text)
        and "pytest.mark.processes" not in text
    ]
    assert unmarked == []
